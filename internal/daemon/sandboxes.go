package daemon

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/moby/moby/client"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/docker"
	"github.com/agentkernel/agentkernel/internal/sandbox/process"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// newSandboxManager builds the drivers and the lifecycle manager. Drivers
// that cannot run here (no bwrap, no dockerd) are still registered: using
// them answers 503 sandbox_unavailable with the reason, instead of the
// daemon refusing to start.
func newSandboxManager(cfg config.Config, st store.Store, blobs blob.Store, pins blob.Pinner, proxy *egress.Proxy, reg prometheus.Registerer, log *slog.Logger) (*sandbox.Manager, []func() error, error) {
	guestBin := cfg.Sandbox.GuestBinary
	if guestBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox.guest_binary: cannot find this executable: %w", err)
		}
		guestBin = exe
	}
	if err := os.MkdirAll(cfg.ImagesDir(), 0o755); err != nil {
		return nil, nil, fmt.Errorf("sandbox.images_dir %s: %w", cfg.ImagesDir(), err)
	}
	proc, err := process.New(process.Config{ImagesDir: cfg.ImagesDir(), Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("process driver: %w", err)
	}
	var dopts []client.Opt
	if cfg.Sandbox.DockerHost != "" {
		dopts = append(dopts, client.WithHost(cfg.Sandbox.DockerHost))
	}
	dock, err := docker.New(cfg.Sandbox.DockerImage, log, dopts...)
	if err != nil {
		return nil, nil, fmt.Errorf("docker driver: %w", err)
	}
	drivers := map[string]sandbox.Driver{process.Name: proc, docker.Name: dock}
	var eg sandbox.Egress
	if proxy != nil {
		eg = proxy
	}
	var node string
	if cfg.Cluster.Clustered() {
		node = nodeID(cfg)
	}
	m, err := sandbox.NewManager(sandbox.ManagerConfig{
		Node:              node,
		Egress:            eg,
		Store:             st,
		Blobs:             sandboxBlobs(cfg.Home, blobs),
		BlobPins:          pins,
		Drivers:           drivers,
		DefaultDriver:     cfg.Sandbox.Driver,
		DefaultImages:     map[string]string{process.Name: cfg.Sandbox.Image},
		DefaultNetwork:    cfg.Sandbox.Network,
		AllowHostNetwork:  cfg.HostNetworkAllowed(),
		Limits:            cfg.SandboxLimits(),
		GuestBinary:       guestBin,
		DataDir:           cfg.SandboxDataDir(),
		RunDir:            cfg.SandboxRunDir(),
		DefaultSleepAfter: cfg.Sandbox.SleepAfter.D(),
		BackgroundCap:     cfg.Sandbox.BackgroundCap.D(),
		BackupTTL:         cfg.Sandbox.BackupTTL.D(),
		ReapInterval:      cfg.Sandbox.ReapInterval.D(),
		WarmPool:          cfg.Sandbox.WarmPool,
		Log:               log,
		Registry:          reg,
		Faults:            sandboxFaults(cfg.Home),
	})
	if err != nil {
		dock.Close()
		return nil, nil, err
	}
	if cfg.Sandbox.WarmPool > 0 && cfg.Sandbox.Driver != process.Name {
		log.Info("the warm pool serves process-driver sandboxes only: sandboxes of the default driver start fresh", "driver", cfg.Sandbox.Driver, "warm_pool", cfg.Sandbox.WarmPool)
	}
	return m, []func() error{dock.Close}, nil
}

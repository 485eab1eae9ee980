package managed

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/packages"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/skills"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/vault"
)

// Service is the Managed Agents domain: the agent, environment and session
// documents (what a create or update body may say, their defaults and
// versioning, the JSON the API returns), their scoping to a tenant (another
// tenant's id is not found) and the creates that must be atomic. The API
// decodes requests, calls it and encodes what it returns; its refusals
// are *InputError.
type Service struct {
	st             store.ManagedStore
	skills         *skills.Service    // nil: an agent's skills are refused
	packages       *packages.Service  // nil: environments' packages are refused
	sandboxes      *sandbox.Manager   // nil: no sandbox layer to check limits against
	sandboxNetwork string             // Options.SandboxNetwork
	vaults         *vault.Service     // nil: a session's vault_ids are refused
	resources      *resources.Service // nil: a session's resources are refused
	maxEventBytes  int
	events         *session.EventLog
	runner         Runner                // nil: no runner to wake or destroy sessions with
	depl           store.DeploymentStore // nil: the store keeps no deployments
	work           session.WorkQueue     // nil: self_hosted environments are refused
	// envHosted caches SelfHostedSession's answer per environment id
	// (an environment's type never changes).
	envHosted sync.Map
	log       *slog.Logger
	now       func() time.Time
}

// Options configure a Service. Only Store is required.
type Options struct {
	Store     store.ManagedStore
	Skills    *skills.Service
	Packages  *packages.Service
	Sandboxes *sandbox.Manager
	// SandboxNetwork is the daemon's sandbox network ([sandbox] network:
	// none, egress or host; "" is egress): the ceiling of what an
	// environment's networking may allow.
	SandboxNetwork string
	Vaults         *vault.Service
	Resources      *resources.Service
	// MaxEventBytes limits one sent event's JSON (413 beyond; default
	// 256 KiB).
	MaxEventBytes int
	// Events is the sessions' event log (append and publish).
	Events *session.EventLog
	Runner Runner
	// Work is the work queue of self_hosted environments; nil refuses them.
	Work session.WorkQueue
	Log  *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// New builds the service.
func New(o Options) *Service {
	s := &Service{st: o.Store, skills: o.Skills, packages: o.Packages, sandboxes: o.Sandboxes, sandboxNetwork: o.SandboxNetwork,
		vaults: o.Vaults, resources: o.Resources, maxEventBytes: o.MaxEventBytes, events: o.Events, runner: o.Runner, work: o.Work, log: o.Log, now: o.Now}
	s.depl, _ = o.Store.(store.DeploymentStore)
	if s.maxEventBytes <= 0 {
		s.maxEventBytes = 256 << 10
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Store is the service's store.
func (s *Service) Store() store.ManagedStore { return s.st }

func (s *Service) clock() time.Time { return s.now().UTC() }

// notFoundAs turns the store's ErrNotFound into a 404 naming the resource.
func notFoundAs(kind, id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound(kind, id)
	}
	return err
}

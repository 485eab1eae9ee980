package monitor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/store"
)

// maxTranscript bounds what is kept of one stream in the store.
const maxTranscript = 32 << 20

// saveTranscript extracts the agent's transcript from the sandbox (the
// task's transcript_path, else its process's stdout and stderr) and saves
// it in the store.
func (s *Service) saveTranscript(ctx context.Context, t *target) (*store.Transcript, error) {
	content, source, err := s.extractTranscript(ctx, t)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(content)
	return s.st.SaveTranscript(ctx, &store.Transcript{
		TaskID: taskID(t.task), SandboxID: t.sandboxID, Source: source, Content: content,
		Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), SavedAt: s.clock.Now(),
	})
}

func (s *Service) extractTranscript(ctx context.Context, t *target) ([]byte, string, error) {
	var fileErr error
	if t.task != nil && t.task.TranscriptPath != "" {
		// The file is the agent's to write: the daemon holds at most what
		// it keeps of a transcript.
		b, err := s.sbx.ReadFileMax(ctx, t.tenantID, t.sandboxID, t.task.TranscriptPath, maxTranscript)
		if err == nil {
			return b, "file:" + t.task.TranscriptPath, nil
		}
		fileErr = err // fall back to the agent's output
	}
	var procIDs []string
	if t.task != nil && t.task.ProcessID != "" {
		procIDs = []string{t.task.ProcessID}
	} else {
		ps, err := s.sbx.ListProcesses(ctx, t.tenantID, t.sandboxID)
		if err != nil {
			return nil, "", errors.Join(fileErr, err)
		}
		for _, p := range ps {
			procIDs = append(procIDs, p.ID)
		}
	}
	if len(procIDs) == 0 {
		return nil, "", errors.Join(fileErr, errors.New("no transcript file and no agent process"))
	}
	var out []byte
	for _, id := range procIDs {
		stdout, err := s.readOutput(ctx, t, id, "stdout")
		if err != nil {
			return nil, "", errors.Join(fileErr, err)
		}
		stderr, err := s.readOutput(ctx, t, id, "stderr")
		if err != nil {
			return nil, "", errors.Join(fileErr, err)
		}
		out = append(out, stdout...)
		if len(stderr) > 0 {
			out = append(out, fmt.Sprintf("\n--- stderr of %s ---\n", id)...)
			out = append(out, stderr...)
		}
	}
	source := "stdout"
	if fileErr != nil {
		source = fmt.Sprintf("stdout (transcript file unreadable: %v)", fileErr)
	}
	return out, source, nil
}

// readOutput reads a background process's whole stream, keeping the last
// maxTranscript bytes.
func (s *Service) readOutput(ctx context.Context, t *target, procID, stream string) ([]byte, error) {
	var out []byte
	var off int64
	for {
		ch, err := s.sbx.ProcessOutput(ctx, t.tenantID, t.sandboxID, guest.OutputRequest{ID: procID, Stream: stream, Offset: off})
		if err != nil {
			return nil, err
		}
		out = append(out, ch.Data...)
		if len(out) > maxTranscript {
			out = out[len(out)-maxTranscript:]
		}
		if len(ch.Data) == 0 || ch.NextOffset >= ch.Size {
			return out, nil
		}
		off = ch.NextOffset
	}
}

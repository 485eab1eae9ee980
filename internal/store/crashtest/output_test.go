package crashtest

import (
	"bytes"
	"fmt"
	"sync"
)

// childOutput parses the child's stdout protocol ("ready n version",
// "acked i version") as it arrives and checks that acks continue the
// iteration the child resumed from, one by one.
type childOutput struct {
	mu       sync.Mutex
	partial  []byte
	ready    chan struct{} // closed on the ready line
	firstAck chan struct{} // closed on the first ack

	gotReady                  bool
	readyN, readyVersion      int64
	acks                      int
	lastAcked, lastAckVersion int64
	protocolErr               error
}

func newChildOutput() *childOutput {
	return &childOutput{ready: make(chan struct{}), firstAck: make(chan struct{})}
}

func (o *childOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		o.line(string(o.partial[:i]))
		o.partial = o.partial[i+1:]
	}
}

func (o *childOutput) line(l string) {
	var a, b int64
	switch {
	case o.protocolErr != nil:
	case !o.gotReady:
		if _, err := fmt.Sscanf(l, "ready %d %d", &a, &b); err != nil {
			o.protocolErr = fmt.Errorf("child's first line %q is not \"ready n version\"", l)
			return
		}
		o.gotReady, o.readyN, o.readyVersion, o.lastAcked = true, a, b, a
		close(o.ready)
	default:
		if _, err := fmt.Sscanf(l, "acked %d %d", &a, &b); err != nil {
			o.protocolErr = fmt.Errorf("child line %q is not \"acked i version\"", l)
			return
		}
		if a != o.lastAcked+1 {
			o.protocolErr = fmt.Errorf("child acked iteration %d after %d: it did not resume from the store's state", a, o.lastAcked)
			return
		}
		o.lastAcked, o.lastAckVersion = a, b
		o.acks++
		if o.acks == 1 {
			close(o.firstAck)
		}
	}
}

// state returns a consistent copy of what was parsed.
func (o *childOutput) state() childOutput {
	o.mu.Lock()
	defer o.mu.Unlock()
	return childOutput{gotReady: o.gotReady, readyN: o.readyN, readyVersion: o.readyVersion,
		acks: o.acks, lastAcked: o.lastAcked, lastAckVersion: o.lastAckVersion, protocolErr: o.protocolErr}
}

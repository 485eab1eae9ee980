package blobgc

import "sync"

// pins are the keys writers of this process hold (blob.Pinner) and the
// keys a collection is deciding about. A key is never both: Pin waits for
// the decision, and the collector skips pinned keys.
type pins struct {
	mu       sync.Mutex
	held     map[string]int
	deciding map[string]chan struct{}
}

func newPins() *pins {
	return &pins{held: map[string]int{}, deciding: map[string]chan struct{}{}}
}

// Pin implements blob.Pinner.
func (p *pins) Pin(key string) func() {
	p.mu.Lock()
	for {
		ch, busy := p.deciding[key]
		if !busy {
			break
		}
		p.mu.Unlock()
		<-ch
		p.mu.Lock()
	}
	p.held[key]++
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.held[key]--; p.held[key] <= 0 {
				delete(p.held, key)
			}
		})
	}
}

// claim marks the unpinned keys as being decided about and returns them;
// pinned keys are left out.
func (p *pins) claim(keys []string) (claimed []string, pinned int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		if p.held[k] > 0 {
			pinned++
			continue
		}
		if _, dup := p.deciding[k]; dup {
			continue
		}
		p.deciding[k] = make(chan struct{})
		claimed = append(claimed, k)
	}
	return claimed, pinned
}

// release ends the decision about keys and wakes the Pins waiting on them.
func (p *pins) release(keys []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		if ch, ok := p.deciding[k]; ok {
			close(ch)
			delete(p.deciding, k)
		}
	}
}

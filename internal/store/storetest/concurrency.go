package storetest

import (
	"errors"
	"fmt"
	"sync"

	"github.com/agentkernel/agentkernel/internal/store"
)

var concurrencyCases = []testCase{
	{"CreateSessionExactlyOneWins", testCreateRace},
	{"CompareAndSetOneWinnerPerVersion", testCASRace},
	{"CheckInterruptFlagExactlyOnce", testInterruptRace},
	{"AppendMessagesDenseSeq", testAppendRace},
	{"IncrementsExact", testIncrementRace},
}

// race runs fn(i) in n goroutines released together and waits for all.
func race(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

func testCreateRace(e *env) {
	const n = 50
	errs := make([]error, n)
	race(n, func(i int) {
		_, errs[i] = e.s.CreateSession(e.ctx, store.CreateSessionParams{ID: "sesn_race", TenantID: e.tenant,
			AgentType: fmt.Sprintf("creator-%d", i)})
	})
	wins, lost := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case errors.Is(err, store.ErrAlreadyExists):
			lost++
		default:
			e.t.Fatalf("creator %d: unexpected error %v", i, err)
		}
	}
	if wins != 1 || lost != n-1 {
		e.t.Fatalf("CreateSession race: %d winners and %d ErrAlreadyExists, want 1 and %d", wins, lost, n-1)
	}
}

func testCASRace(e *env) {
	const workers, tries = 20, 15
	s0 := e.session()
	type win struct{ expected, got int64 }
	var mu sync.Mutex
	var wins []win
	var failures []error
	race(workers, func(i int) {
		for range tries {
			cur, err := e.s.GetSession(e.ctx, s0.ID)
			if err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
				return
			}
			next := store.StatusPaused
			if cur.Status == store.StatusPaused {
				next = store.StatusActive
			}
			res, err := e.s.CompareAndSetStatus(e.ctx, store.CompareAndSetStatusParams{SessionID: s0.ID,
				Expected: []store.SessionStatus{store.StatusActive, store.StatusPaused}, New: next,
				ExpectedVersion: ptr(cur.Version)})
			mu.Lock()
			switch {
			case err != nil:
				failures = append(failures, err)
			case res.OK:
				wins = append(wins, win{cur.Version, res.NewVersion})
			case res.CurrentVersion < cur.Version:
				failures = append(failures, fmt.Errorf("mismatch reported version %d below the %d read before", res.CurrentVersion, cur.Version))
			}
			mu.Unlock()
		}
	})
	if len(failures) > 0 {
		e.t.Fatalf("CAS race: %d errors, first: %v", len(failures), failures[0])
	}
	final := e.get(s0.ID)
	if len(wins) == 0 {
		e.t.Fatal("CAS race: no CAS succeeded")
	}
	if int64(len(wins)) != final.Version-s0.Version {
		e.t.Fatalf("CAS race: %d successful CAS but the version moved %d -> %d", len(wins), s0.Version, final.Version)
	}
	seen := map[int64]bool{}
	for _, w := range wins {
		if seen[w.expected] {
			e.t.Fatalf("CAS race: two winners for expected version %d", w.expected)
		}
		seen[w.expected] = true
		if w.got != w.expected+1 {
			e.t.Fatalf("CAS race: winner at version %d got new version %d", w.expected, w.got)
		}
	}
}

func testInterruptRace(e *env) {
	const n = 32
	s0 := e.session()
	mustOK(e.t, e.s.SetInterruptFlag(e.ctx, s0.ID, "stop"), "SetInterruptFlag")
	flags := make([]store.InterruptFlag, n)
	errs := make([]error, n)
	race(n, func(i int) { flags[i], errs[i] = e.s.CheckInterruptFlag(e.ctx, s0.ID) })
	seen := 0
	for i := range n {
		mustOK(e.t, errs[i], "CheckInterruptFlag")
		if flags[i].Set {
			seen++
			equal(e.t, "reason seen by the winner", flags[i].Reason, "stop")
		}
	}
	equal(e.t, "callers that saw the flag set", seen, 1)
}

func testAppendRace(e *env) {
	const workers, calls = 8, 12
	s0 := e.session()
	var mu sync.Mutex
	lasts := map[int64]bool{}
	var failures []error
	race(workers, func(w int) {
		for c := range calls {
			batch := make([]string, 1+c%3)
			for k := range batch {
				batch[k] = fmt.Sprintf("w%d-c%d-m%d", w, c, k)
			}
			last, err := e.s.AppendMessages(e.ctx, s0.ID, msgs(batch...))
			mu.Lock()
			if err != nil {
				failures = append(failures, err)
			} else if lasts[last] {
				failures = append(failures, fmt.Errorf("two appends returned last seq %d", last))
			} else {
				lasts[last] = true
			}
			mu.Unlock()
		}
	})
	if len(failures) > 0 {
		e.t.Fatalf("append race: %v", failures[0])
	}
	all := e.messages(s0.ID)
	want := 0
	for c := range calls {
		want += workers * (1 + c%3)
	}
	equal(e.t, "message count", len(all), want)
	for i, m := range all {
		if m.Seq != int64(i+1) {
			e.t.Fatalf("message %d has Seq %d: Seq must be dense 1..N", i, m.Seq)
		}
	}
	// Each batch is contiguous and in order.
	txt := texts(e.t, all)
	for i := 0; i < len(txt); {
		var w, c, k int
		if _, err := fmt.Sscanf(txt[i], "w%d-c%d-m%d", &w, &c, &k); err != nil || k != 0 {
			e.t.Fatalf("message %d (%q) does not start a batch", i+1, txt[i])
		}
		for k := range 1 + c%3 {
			if exp := fmt.Sprintf("w%d-c%d-m%d", w, c, k); i >= len(txt) || txt[i] != exp {
				e.t.Fatalf("batch w%d-c%d interleaved at seq %d", w, c, i+1)
			}
			i++
		}
	}
	n, err := e.s.CountMessages(e.ctx, s0.ID)
	mustOK(e.t, err, "CountMessages")
	equal(e.t, "CountMessages", n, int64(want))
}

func testIncrementRace(e *env) {
	const workers, each = 10, 10
	s0 := e.session()
	var mu sync.Mutex
	steps, resumes := map[int64]bool{}, map[int64]bool{}
	var failures []error
	race(2*workers, func(w int) {
		for range each {
			var n int64
			var err error
			seen := steps
			if w%2 == 0 {
				n, err = e.s.IncrementStepCount(e.ctx, s0.ID)
			} else {
				n, err = e.s.IncrementResumeCount(e.ctx, s0.ID)
				seen = resumes
			}
			mu.Lock()
			if err != nil {
				failures = append(failures, err)
			} else if seen[n] {
				failures = append(failures, fmt.Errorf("counter value %d returned twice", n))
			}
			seen[n] = true
			mu.Unlock()
		}
	})
	if len(failures) > 0 {
		e.t.Fatalf("increment race: %v", failures[0])
	}
	got := e.get(s0.ID)
	equal(e.t, "StepCount", got.StepCount, workers*each)
	equal(e.t, "ResumeCount", got.ResumeCount, workers*each)
	equal(e.t, "version", got.Version, s0.Version+2*workers*each)
}

package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var opChunkCases = []opCase{
	{"AppendDenseSeqPerStep", testOpChunkAppend},
	{"AppendRaceDenseSeq", testOpChunkRace},
	{"DeleteUpToTurn", testOpChunkDelete},
	{"AppendInvalid", testOpChunkInvalid},
	{"PartialBlockOverwrite", testPartialBlock},
}

// testPartialBlock: a step has one partial block, each save overwrites
// it, and DeleteStreamChunks drops it with the chunks.
func testPartialBlock(e *opEnv) {
	_, err := e.s.GetPartialBlock(e.ctx, "sesn_ops", 1, 1)
	mustErrIs(e.t, err, store.ErrNotFound, "GetPartialBlock before any save")
	for i, text := range []string{`"Hel"`, `"Hello, wor"`} {
		mustOK(e.t, e.s.SavePartialBlock(e.ctx, &store.PartialBlock{SessionID: "sesn_ops", TurnSeq: 1, Step: 1,
			Index: int64(i), Data: json.RawMessage(text)}), "SavePartialBlock")
	}
	mustOK(e.t, e.s.SavePartialBlock(e.ctx, &store.PartialBlock{SessionID: "sesn_ops", TurnSeq: 2, Step: 1,
		Data: json.RawMessage(`"other turn"`), UpdatedAt: opAt(time.Second)}), "SavePartialBlock of turn 2")
	b, err := e.s.GetPartialBlock(e.ctx, "sesn_ops", 1, 1)
	mustOK(e.t, err, "GetPartialBlock")
	equal(e.t, "Index", b.Index, int64(1))
	jsonEq(e.t, "Data", b.Data, `"Hello, wor"`)
	b, err = e.s.GetPartialBlock(e.ctx, "sesn_ops", 2, 1)
	mustOK(e.t, err, "GetPartialBlock of turn 2")
	sbSameTime(e.t, "UpdatedAt", b.UpdatedAt, opAt(time.Second))
	mustOK(e.t, e.s.DeleteStreamChunks(e.ctx, "sesn_ops", 1), "DeleteStreamChunks")
	_, err = e.s.GetPartialBlock(e.ctx, "sesn_ops", 1, 1)
	mustErrIs(e.t, err, store.ErrNotFound, "GetPartialBlock after DeleteStreamChunks")
	_, err = e.s.GetPartialBlock(e.ctx, "sesn_ops", 2, 1)
	mustOK(e.t, err, "GetPartialBlock of a later turn after DeleteStreamChunks")
	err = e.s.SavePartialBlock(e.ctx, &store.PartialBlock{SessionID: "sesn_ops", TurnSeq: 1, Step: 1, Data: json.RawMessage(`{"x":`)})
	mustErrIs(e.t, err, store.ErrInvalid, "SavePartialBlock with bad JSON")
}

func (e *opEnv) appendChunk(session string, turn, step int64, data string) *store.StreamChunk {
	e.t.Helper()
	c, err := e.s.AppendStreamChunk(e.ctx, &store.StreamChunk{SessionID: session, TurnSeq: turn, Step: step,
		Data: json.RawMessage(data)})
	mustOK(e.t, err, "AppendStreamChunk")
	return c
}

// chunkData lists one step's chunk data, checking Seq is 1..N.
func (e *opEnv) chunkData(session string, turn, step int64) []string {
	e.t.Helper()
	cs, err := e.s.ListStreamChunks(e.ctx, session, turn, step)
	mustOK(e.t, err, "ListStreamChunks")
	out := []string{}
	for i, c := range cs {
		if c.Seq != int64(i+1) || c.SessionID != session || c.TurnSeq != turn || c.Step != step {
			e.t.Fatalf("chunk %d of (%s, %d, %d) is (%s, %d, %d) seq %d: Seq must be dense 1..N",
				i, session, turn, step, c.SessionID, c.TurnSeq, c.Step, c.Seq)
		}
		var s string
		if err := json.Unmarshal(c.Data, &s); err != nil {
			e.t.Fatalf("chunk %d data %s: %v", c.Seq, c.Data, err)
		}
		out = append(out, s)
	}
	return out
}

func testOpChunkAppend(e *opEnv) {
	before := time.Now().Add(-time.Minute)
	for i, text := range []string{"Hel", "lo, ", "world"} {
		c := e.appendChunk("sesn_ops", 1, 0, fmt.Sprintf("%q", text))
		equal(e.t, "Seq", c.Seq, int64(i+1))
		if c.CreatedAt.Before(before) {
			e.t.Fatalf("CreatedAt = %v, want the store's now", c.CreatedAt)
		}
	}
	// Another step, turn or session has its own Seq.
	equal(e.t, "Seq of step 1", e.appendChunk("sesn_ops", 1, 1, `"a"`).Seq, int64(1))
	equal(e.t, "Seq of turn 2", e.appendChunk("sesn_ops", 2, 0, `"b"`).Seq, int64(1))
	equal(e.t, "Seq of another session", e.appendChunk("sesn_other", 1, 0, `"c"`).Seq, int64(1))

	// A given CreatedAt is kept; Data round-trips.
	c, err := e.s.AppendStreamChunk(e.ctx, &store.StreamChunk{SessionID: "sesn_ops", TurnSeq: 1, Step: 1,
		Data: json.RawMessage(`{"type":"text_delta","text":"x"}`), CreatedAt: opAt(time.Second)})
	mustOK(e.t, err, "AppendStreamChunk with CreatedAt")
	sbSameTime(e.t, "CreatedAt", c.CreatedAt, opAt(time.Second))
	cs, err := e.s.ListStreamChunks(e.ctx, "sesn_ops", 1, 1)
	mustOK(e.t, err, "ListStreamChunks")
	equal(e.t, "chunks of step 1", len(cs), 2)
	jsonEq(e.t, "Data", cs[1].Data, `{"type":"text_delta","text":"x"}`)
	sbSameTime(e.t, "listed CreatedAt", cs[1].CreatedAt, opAt(time.Second))

	sbEqualIDs(e.t, "step 0", e.chunkData("sesn_ops", 1, 0), "Hel", "lo, ", "world")
	sbEqualIDs(e.t, "a step without chunks", e.chunkData("sesn_ops", 1, 7))
}

// testOpChunkRace: concurrent appenders to two steps each get 1..N with
// nothing lost or duplicated.
func testOpChunkRace(e *opEnv) {
	const n = 20
	var mu sync.Mutex
	seqs := map[int64]map[int64]bool{0: {}, 1: {}}
	var failures []error
	race(2*n, func(i int) {
		step := int64(i % 2)
		c, err := e.s.AppendStreamChunk(e.ctx, &store.StreamChunk{SessionID: "sesn_ops", TurnSeq: 1, Step: step,
			Data: json.RawMessage(fmt.Sprintf(`"w%02d"`, i))})
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			failures = append(failures, err)
		case seqs[step][c.Seq]:
			failures = append(failures, fmt.Errorf("two appends to step %d got Seq %d", step, c.Seq))
		default:
			seqs[step][c.Seq] = true
		}
	})
	if len(failures) > 0 {
		e.t.Fatalf("append race: %v", failures[0])
	}
	for step := range int64(2) {
		data := e.chunkData("sesn_ops", 1, step) // checks 1..N
		equal(e.t, fmt.Sprintf("chunks of step %d", step), len(data), n)
		seen := map[string]bool{}
		for _, d := range data {
			var w int
			if _, err := fmt.Sscanf(d, "w%d", &w); err != nil || int64(w%2) != step || seen[d] {
				e.t.Fatalf("step %d has chunk %q (duplicate or from the other step)", step, d)
			}
			seen[d] = true
		}
	}
}

func testOpChunkDelete(e *opEnv) {
	for turn := int64(1); turn <= 3; turn++ {
		e.appendChunk("sesn_ops", turn, 0, `"x"`)
		e.appendChunk("sesn_ops", turn, 1, `"y"`)
	}
	e.appendChunk("sesn_other", 1, 0, `"z"`)
	mustOK(e.t, e.s.DeleteStreamChunks(e.ctx, "sesn_ops", 2), "DeleteStreamChunks")
	for turn := int64(1); turn <= 2; turn++ {
		sbEqualIDs(e.t, fmt.Sprintf("turn %d step 0 after delete", turn), e.chunkData("sesn_ops", turn, 0))
		sbEqualIDs(e.t, fmt.Sprintf("turn %d step 1 after delete", turn), e.chunkData("sesn_ops", turn, 1))
	}
	sbEqualIDs(e.t, "turn 3 after delete", e.chunkData("sesn_ops", 3, 1), "y")
	sbEqualIDs(e.t, "other session after delete", e.chunkData("sesn_other", 1, 0), "z")
	// A deleted step that streams again starts over at Seq 1.
	equal(e.t, "Seq after delete", e.appendChunk("sesn_ops", 2, 0, `"again"`).Seq, int64(1))
	mustOK(e.t, e.s.DeleteStreamChunks(e.ctx, "sesn_none", 5), "DeleteStreamChunks of a session without chunks")
}

func testOpChunkInvalid(e *opEnv) {
	for name, c := range map[string]store.StreamChunk{
		"no session":    {TurnSeq: 1, Data: json.RawMessage(`"x"`)},
		"no data":       {SessionID: "sesn_ops", TurnSeq: 1},
		"bad JSON":      {SessionID: "sesn_ops", TurnSeq: 1, Data: json.RawMessage(`{"x":`)},
		"negative turn": {SessionID: "sesn_ops", TurnSeq: -1, Data: json.RawMessage(`"x"`)},
	} {
		_, err := e.s.AppendStreamChunk(e.ctx, &c)
		mustErrIs(e.t, err, store.ErrInvalid, "AppendStreamChunk with "+name)
	}
	sbEqualIDs(e.t, "chunks after invalid appends", e.chunkData("sesn_ops", 1, 0))
}

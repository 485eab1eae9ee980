package storetest

import (
	"reflect"

	"github.com/agentkernel/agentkernel/internal/store"
)

var messageCases = []testCase{
	{"AppendGetCount", testAppendGetCount},
	{"Pagination", testMessagePagination},
	{"Truncate", testTruncate},
	{"BadPaths", testMessageBadPaths},
}

func testAppendGetCount(e *env) {
	s0 := e.session()
	last, err := e.s.AppendMessages(e.ctx, s0.ID, []store.NewMessage{
		{Role: "user", Content: []byte(`{"type":"text","text":"hi"}`)},
		{Role: "assistant", Content: []byte(`[{"type":"tool_use","id":"t1"}]`)},
	})
	mustOK(e.t, err, "AppendMessages")
	equal(e.t, "last seq", last, 2)
	v1 := e.get(s0.ID).Version
	if v1 <= s0.Version {
		e.t.Fatalf("AppendMessages did not bump the version: %d -> %d", s0.Version, v1)
	}
	equal(e.t, "second append's last seq", e.appendMsgs(s0.ID, "third"), 3)

	all := e.messages(s0.ID)
	equal(e.t, "len", len(all), 3)
	for i, m := range all {
		equal(e.t, "SessionID", m.SessionID, s0.ID)
		equal(e.t, "Seq", m.Seq, int64(i+1))
		if m.CreatedAt.IsZero() {
			e.t.Fatalf("message %d has no CreatedAt", m.Seq)
		}
	}
	equal(e.t, "role 1", all[0].Role, "user")
	equal(e.t, "role 2", all[1].Role, "assistant")
	jsonEq(e.t, "content 1", all[0].Content, `{"type":"text","text":"hi"}`)
	jsonEq(e.t, "content 2", all[1].Content, `[{"type":"tool_use","id":"t1"}]`)
	n, err := e.s.CountMessages(e.ctx, s0.ID)
	mustOK(e.t, err, "CountMessages")
	equal(e.t, "count", n, 3)

	// Messages of another session are separate and start at Seq 1.
	other := e.session()
	equal(e.t, "other session's first seq", e.appendMsgs(other.ID, "x"), 1)
	empty := e.session()
	got, err := e.s.GetMessages(e.ctx, store.GetMessagesParams{SessionID: empty.ID})
	mustOK(e.t, err, "GetMessages(empty session)")
	equal(e.t, "messages of an empty session", len(got), 0)
	n, err = e.s.CountMessages(e.ctx, empty.ID)
	mustOK(e.t, err, "CountMessages(empty session)")
	equal(e.t, "count of an empty session", n, 0)
}

func testMessagePagination(e *env) {
	s0 := e.session()
	e.appendMsgs(s0.ID, "1", "2", "3", "4", "5", "6", "7")
	var pages [][]string
	after := int64(0)
	for {
		page, err := e.s.GetMessages(e.ctx, store.GetMessagesParams{SessionID: s0.ID, AfterSeq: after, Limit: 3})
		mustOK(e.t, err, "GetMessages page")
		if len(page) == 0 {
			break
		}
		pages = append(pages, texts(e.t, page))
		after = page[len(page)-1].Seq
	}
	want := [][]string{{"1", "2", "3"}, {"4", "5", "6"}, {"7"}}
	if !reflect.DeepEqual(pages, want) {
		e.t.Fatalf("pages: got %v, want %v", pages, want)
	}
	tail, err := e.s.GetMessages(e.ctx, store.GetMessagesParams{SessionID: s0.ID, AfterSeq: 5})
	mustOK(e.t, err, "GetMessages after 5")
	if got := texts(e.t, tail); !reflect.DeepEqual(got, []string{"6", "7"}) {
		e.t.Fatalf("after 5, no limit: got %v", got)
	}
}

func testTruncate(e *env) {
	s0 := e.session()
	e.appendMsgs(s0.ID, "a", "b", "c", "d")
	v := e.get(s0.ID).Version
	mustOK(e.t, e.s.TruncateMessages(e.ctx, s0.ID, 2), "TruncateMessages")
	if got := e.get(s0.ID).Version; got <= v {
		e.t.Fatalf("TruncateMessages did not bump the version: %d -> %d", v, got)
	}
	if got := texts(e.t, e.messages(s0.ID)); !reflect.DeepEqual(got, []string{"a", "b"}) {
		e.t.Fatalf("after truncate to 2: %v", got)
	}
	// Seq stays dense: the next append continues after the kept messages.
	equal(e.t, "seq after truncate", e.appendMsgs(s0.ID, "e"), 3)
	mustOK(e.t, e.s.TruncateMessages(e.ctx, s0.ID, 10), "TruncateMessages beyond the end")
	n, _ := e.s.CountMessages(e.ctx, s0.ID)
	equal(e.t, "count after truncating beyond the end", n, 3)
	mustOK(e.t, e.s.TruncateMessages(e.ctx, s0.ID, 0), "TruncateMessages to 0")
	n, _ = e.s.CountMessages(e.ctx, s0.ID)
	equal(e.t, "count after truncating to 0", n, 0)
	mustErrIs(e.t, e.s.TruncateMessages(e.ctx, s0.ID, -1), store.ErrInvalid, "TruncateMessages(-1)")
}

func testMessageBadPaths(e *env) {
	s0 := e.session()
	_, err := e.s.AppendMessages(e.ctx, s0.ID, []store.NewMessage{{Role: "user", Content: []byte(`{"ok":1}`)},
		{Role: "user", Content: []byte(`{broken`)}})
	mustErrIs(e.t, err, store.ErrInvalid, "AppendMessages with malformed content")
	_, err = e.s.AppendMessages(e.ctx, s0.ID, []store.NewMessage{{Role: "", Content: []byte(`1`)}})
	mustErrIs(e.t, err, store.ErrInvalid, "AppendMessages without role")
	n, _ := e.s.CountMessages(e.ctx, s0.ID)
	equal(e.t, "a rejected batch appends nothing", n, 0)

	_, err = e.s.AppendMessages(e.ctx, "sesn_missing", msgs("x"))
	mustErrIs(e.t, err, store.ErrNotFound, "AppendMessages(unknown)")
	_, err = e.s.GetMessages(e.ctx, store.GetMessagesParams{SessionID: "sesn_missing"})
	mustErrIs(e.t, err, store.ErrNotFound, "GetMessages(unknown)")
	_, err = e.s.CountMessages(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "CountMessages(unknown)")
	mustErrIs(e.t, e.s.TruncateMessages(e.ctx, "sesn_missing", 0), store.ErrNotFound, "TruncateMessages(unknown)")
}

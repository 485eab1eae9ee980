package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel"
)

// sessionFork forks a session at an event (the latest by default): a new
// session with the transcript and the workspace of that point.
func sessionFork(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("session fork", "session fork SESSION_ID [--at EVENT_ID] [--json]")
	var cf clientFlags
	cf.register(fs)
	at := fs.String("at", "", "the event to fork at (default: the latest)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: session fork takes one session id", errUsage)
	}
	f, err := cf.client(m).Sessions.Fork(ctx, fs.Arg(0), *at)
	if err != nil {
		return err
	}
	if cf.json {
		return printRaw(m, string(f.Raw))
	}
	if f.Lineage != nil && f.Lineage.ForkedFrom != nil {
		fmt.Fprintf(m.Stderr, "forked %s at event %d\n", f.Lineage.ForkedFrom.SessionID, f.Lineage.ForkedFrom.AtSeq)
	}
	fmt.Fprintln(m.Stdout, f.ID)
	return nil
}

// sessionRewind takes a session back to an event; what it cuts off is kept
// as a branch.
func sessionRewind(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("session rewind", "session rewind SESSION_ID EVENT_ID [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: session rewind takes a session id and the event id to go back to", errUsage)
	}
	res, err := cf.client(m).Sessions.Rewind(ctx, fs.Arg(0), fs.Arg(1))
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, map[string]json.RawMessage{"session": res.Session.Raw, "branch": res.Branch.Raw})
	}
	fmt.Fprintf(m.Stderr, "rewound %s; the events it cut off are kept in branch %s\n", res.Session.ID, res.Branch.ID)
	fmt.Fprintln(m.Stdout, res.Branch.ID)
	return nil
}

// sessionHistory shows a session's lineage, its turns and its branches.
func sessionHistory(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("session history", "session history SESSION_ID [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: session history takes one session id", errUsage)
	}
	h, err := cf.client(m).Sessions.History(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, h)
	}
	if l := h.Lineage; l != nil {
		if l.ForkedFrom != nil {
			fmt.Fprintf(m.Stdout, "forked from %s at event %d\n", l.ForkedFrom.SessionID, l.ForkedFrom.AtSeq)
		}
		if l.BranchOf != nil {
			fmt.Fprintf(m.Stdout, "abandoned branch of %s, cut off at event %d\n", l.BranchOf.SessionID, l.BranchOf.AtSeq)
		}
	}
	rows := make([][]string, 0, len(h.Turns))
	for _, t := range h.Turns {
		took := "-"
		if t.EndedAt != nil {
			took = t.EndedAt.Sub(t.StartedAt).Round(time.Millisecond).String()
		}
		var u struct {
			In  int64 `json:"input_tokens"`
			Out int64 `json:"output_tokens"`
		}
		_ = json.Unmarshal(t.Usage, &u)
		rows = append(rows, []string{fmt.Sprint(t.Seq), t.Status, t.StartedAt.Format(time.RFC3339), took,
			fmt.Sprintf("%d/%d", u.In, u.Out), orDash(shortSnap(t.Workspace)), orDash(t.Error)})
	}
	if err := table(m.Stdout, []string{"TURN", "STATUS", "STARTED", "TOOK", "TOKENS IN/OUT", "WORKSPACE", "ERROR"}, rows); err != nil {
		return err
	}
	if len(h.Branches) > 0 {
		fmt.Fprintln(m.Stdout)
		brows := make([][]string, 0, len(h.Branches))
		for _, b := range h.Branches {
			at := "-"
			if b.BranchedAt != nil {
				at = b.BranchedAt.Format(time.RFC3339)
			}
			brows = append(brows, []string{b.ID, fmt.Sprint(b.BranchAtSeq), at, orDash(shortSnap(b.Workspace))})
		}
		return table(m.Stdout, []string{"BRANCH", "CUT AT EVENT", "REWOUND", "WORKSPACE"}, brows)
	}
	return nil
}

// shortSnap shortens a workspace snapshot id for a table.
func shortSnap(id string) string {
	if h, ok := strings.CutPrefix(id, "wsnap_"); ok && len(h) > 12 {
		return "wsnap_" + h[:12]
	}
	return id
}

// branchMarks maps an event's sequence number to the branches a rewind cut
// off right after it, for the trajectory view.
func branchMarks(ctx context.Context, c *agentkernel.Client, id string) map[int64][]string {
	bs, err := c.Sessions.Branches(ctx, id)
	if err != nil {
		return nil // a daemon without branches, or a branch itself: no marks
	}
	out := map[int64][]string{}
	for _, b := range bs {
		if b.Lineage != nil && b.Lineage.BranchOf != nil {
			out[b.Lineage.BranchOf.AtSeq] = append(out[b.Lineage.BranchOf.AtSeq], b.ID)
		}
	}
	return out
}

package journal

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEveryKindHasARecoveryRule is seed 003's authoring checklist,
// enforced on behaviour: every op kind the package defines (a Kind…
// string constant) is in Kinds, Decide has a rule for it in every state
// (a kind added without one fails here), and the rule is the one below —
// completed ops are replayed; a started, not completed op is resent only
// where the upstream dedupes on the op id, redone only where the call only
// reads, and otherwise handed to what can know (the guest) or reported as
// ambiguous, never silently re-run.
func TestEveryKindHasARecoveryRule(t *testing.T) {
	started := func(keyed, readOnly bool) State { return State{Keyed: keyed, ReadOnly: readOnly} }
	// The expected decision for a started, not completed op, per kind and
	// per (keyed, read-only).
	want := map[string]map[State]Action{
		KindModelRequest: {
			started(false, false): Continue, started(true, false): Resend,
			started(false, true): Continue, started(true, true): Resend,
		},
		KindToolExec: {
			started(false, false): AskGuest, started(true, false): AskGuest,
			started(false, true): AskGuest, started(true, true): AskGuest,
		},
		KindOutboundCall: {
			started(false, false): ReportAmbiguous, started(true, false): Resend,
			started(false, true): Redo, started(true, true): Redo,
		},
		KindMCPCall: {
			started(false, false): ReportAmbiguous, started(true, false): ReportAmbiguous,
			started(false, true): ReportAmbiguous, started(true, true): ReportAmbiguous,
		},
		KindThreadCall: {
			started(false, false): Resend, started(true, false): Resend,
			started(false, true): Resend, started(true, true): Resend,
		},
	}
	defined := definedKinds(t)
	if len(defined) == 0 {
		t.Fatal("found no Kind… constants in the package source")
	}
	for name, value := range defined {
		if !slices.Contains(Kinds, value) {
			t.Errorf("constant %s = %q is not in Kinds", name, value)
		}
		if _, err := Decide(value, State{}); err != nil {
			t.Errorf("constant %s = %q: Decide has no rule for it: %v", name, value, err)
		}
	}
	seen := map[string]bool{}
	for _, k := range Kinds {
		if seen[k] {
			t.Errorf("kind %q is listed twice in Kinds", k)
		}
		seen[k] = true
		rules, ok := want[k]
		if !ok {
			t.Errorf("kind %q: no expected decisions in this test; add them", k)
			continue
		}
		for st, wantAct := range rules {
			got, err := Decide(k, st)
			if err != nil || got != wantAct {
				t.Errorf("Decide(%s, started, keyed=%v, read-only=%v) = %q, %v; want %q", k, st.Keyed, st.ReadOnly, got, err, wantAct)
			}
			st.Completed = true
			if got, err := Decide(k, st); err != nil || got != Replay {
				t.Errorf("Decide(%s, completed, keyed=%v, read-only=%v) = %q, %v; want %q", k, st.Keyed, st.ReadOnly, got, err, Replay)
			}
		}
		// The words say the same: one per kind, saying what happens to a
		// started op.
		if rule := RecoveryRules[k]; !strings.Contains(rule, "Started, not completed") {
			t.Errorf("kind %q: RecoveryRules does not say what happens to a started, not completed op: %q", k, rule)
		}
	}
	for k := range RecoveryRules {
		if !seen[k] {
			t.Errorf("RecoveryRules has a rule for %q, which is not in Kinds", k)
		}
	}
	for _, st := range []State{{}, {Completed: true}} {
		if got, err := Decide("webhook_delivery", st); !errors.Is(err, ErrUnknownKind) {
			t.Errorf("Decide of a kind with no rule = %q, %v; want ErrUnknownKind", got, err)
		}
	}
}

// definedKinds parses the package's non-test sources for string constants
// named Kind…, so a kind added as a constant but forgotten in Kinds fails
// the test too.
func definedKinds(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				addKindConsts(t, gd, out)
			}
		}
	}
	return out
}

// addKindConsts adds the Kind… constants of one const block to out.
func addKindConsts(t *testing.T, gd *ast.GenDecl, out map[string]string) {
	t.Helper()
	for _, spec := range gd.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, "Kind") || i >= len(vs.Values) {
				continue
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("constant %s is not a string literal; define kinds as string constants", name.Name)
				continue
			}
			v, _ := strconv.Unquote(lit.Value)
			out[name.Name] = v
		}
	}
}

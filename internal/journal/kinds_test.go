package journal

import (
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
// enforced: every op kind the package defines (a Kind… string constant) is
// in Kinds, and every kind in Kinds has a recovery rule that says what
// happens to an op that started and never completed.
func TestEveryKindHasARecoveryRule(t *testing.T) {
	defined := definedKinds(t)
	if len(defined) == 0 {
		t.Fatal("found no Kind… constants in the package source")
	}
	for name, value := range defined {
		if !slices.Contains(Kinds, value) {
			t.Errorf("constant %s = %q is not in Kinds", name, value)
		}
	}
	seen := map[string]bool{}
	for _, k := range Kinds {
		if seen[k] {
			t.Errorf("kind %q is listed twice in Kinds", k)
		}
		seen[k] = true
		rule := RecoveryRules[k]
		if strings.TrimSpace(rule) == "" {
			t.Errorf("kind %q has no recovery rule in RecoveryRules", k)
			continue
		}
		if !strings.Contains(rule, "Started, not completed") {
			t.Errorf("kind %q: the recovery rule does not say what happens to a started, not completed op: %q", k, rule)
		}
	}
	for k := range RecoveryRules {
		if !seen[k] {
			t.Errorf("RecoveryRules has a rule for %q, which is not in Kinds", k)
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

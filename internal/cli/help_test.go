package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// groups are the command groups and subcommands a user can count on; help
// and completion must list at least these.
var groups = map[string][]string{
	"sandbox":      {"create", "ls", "get", "exec", "cp", "stop", "start", "snapshot", "backups", "rm"},
	"object":       {"call", "get", "ls", "rm", "alarm", "hibernate", "checkpoint", "define", "classes", "init"},
	"object alarm": {"set", "ls", "rm"},
	"key":          {"create", "ls", "revoke"},
	"tenant":       {"create", "ls"},
	"agent":        {"create", "ls"},
	"env":          {"create", "ls"},
	"session":      {"new", "send", "tail", "ls", "rm"},
	"task":         {"run", "ls", "get", "logs", "transcript"},
	"ticket":       {"create", "ls", "show"},
	"image":        {"import", "ls", "rm"},
}

// listed returns the command names of a help text's "Commands:" section.
func listed(t *testing.T, help string) []string {
	t.Helper()
	_, section, ok := strings.Cut(help, "Commands:\n")
	if !ok {
		t.Fatalf("no Commands: section in\n%s", help)
	}
	var names []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("help line %q has no summary", line)
		}
		names = append(names, f[0])
	}
	return names
}

// TestGroupHelp: every group answers -h, --help and help with its
// subcommands, one line each, on stdout; the bare group lists them on
// stderr and exits 2 (a usage error, like any missing argument).
func TestGroupHelp(t *testing.T) {
	bin := binary(t)
	env := cleanEnv()
	for group, want := range groups {
		g := strings.Fields(group)
		for _, h := range []string{"-h", "--help", "help"} {
			out, _ := run2(t, bin, env, 0, append(g, h)...)
			got := listed(t, out)
			for _, w := range want {
				if !slices.Contains(got, w) {
					t.Errorf("agentkernel %s %s does not list %q:\n%s", group, h, w, out)
				}
			}
		}
		_, stderr := run2(t, bin, env, 2, g...)
		if got := listed(t, stderr); !slices.Contains(got, want[0]) {
			t.Errorf("bare agentkernel %s does not list its subcommands:\n%s", group, stderr)
		}
	}
	// `help SUB` shows that subcommand's flags.
	if _, stderr := run2(t, bin, env, 0, "sandbox", "help", "exec"); !strings.Contains(stderr, "-timeout") {
		t.Errorf("sandbox help exec: %q", stderr)
	}
	// An unknown subcommand is a usage error that points at the list.
	if _, stderr := run2(t, bin, env, 2, "sandbox", "frobnicate"); !strings.Contains(stderr, `"frobnicate"`) || !strings.Contains(stderr, "agentkernel sandbox --help") {
		t.Errorf("unknown subcommand: %q", stderr)
	}
}

func TestVersionFlag(t *testing.T) {
	bin := binary(t)
	want := run(t, bin, cleanEnv(), 0, "version")
	if got := run(t, bin, cleanEnv(), 0, "--version"); got != want {
		t.Fatalf("--version = %q, version = %q", got, want)
	}
}

// TestCompletion: the bash script parses, and completing a group offers
// exactly the subcommands its help lists; a command's flags and fixed
// words are offered too.
func TestCompletion(t *testing.T) {
	bin := binary(t)
	script := filepath.Join(t.TempDir(), "agentkernel.bash")
	if err := os.WriteFile(script, []byte(run(t, bin, cleanEnv(), 0, "completion", "bash")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	complete := func(words ...string) []string {
		t.Helper()
		// COMP_WORDS as bash fills them for `agentkernel WORDS…<TAB>`.
		var quoted []string
		for _, w := range append([]string{"agentkernel"}, words...) {
			quoted = append(quoted, "'"+w+"'")
		}
		prog := "source " + script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
			strconv.Itoa(len(words)) + "\n_agentkernel\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		out, err := exec.Command("bash", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("completing %q: %v\n%s", words, err, out)
		}
		return strings.Fields(string(out))
	}
	for group := range groups {
		g := strings.Fields(group)
		help := listed(t, run(t, bin, cleanEnv(), 0, append(g, "--help")...))
		got := complete(append(g, "")...)
		if !slices.Equal(got, help) {
			t.Errorf("completing %q offers %q; its help lists %q", group, got, help)
		}
	}
	top := complete("")
	for group := range groups {
		if g := strings.Fields(group); !slices.Contains(top, g[0]) {
			t.Errorf("top-level completion %q lacks %q", top, g[0])
		}
	}
	if got := complete("sand"); !slices.Equal(got, []string{"sandbox"}) {
		t.Errorf("completing sand: %q", got)
	}
	if got := complete("sandbox", "create", "--"); !slices.Contains(got, "--json") || !slices.Contains(got, "--driver") {
		t.Errorf("sandbox create flags: %q", got)
	}
	// Aliases lead to the same command.
	if got := complete("sandbox", "list", "--st"); !slices.Equal(got, []string{"--state"}) {
		t.Errorf("sandbox list flags: %q", got)
	}
	if got := complete("completion", ""); !slices.Equal(got, []string{"bash", "zsh", "fish"}) {
		t.Errorf("completion words: %q", got)
	}
	for _, sh := range []string{"zsh", "fish"} {
		if out := run(t, bin, cleanEnv(), 0, "completion", sh); !strings.Contains(out, "sandbox") {
			t.Errorf("completion %s: %q", sh, out)
		}
	}
	run(t, bin, cleanEnv(), 2, "completion", "tcsh")
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel"
)

func objectCommand() command {
	return command{name: "object", summary: "durable objects: stateful actors addressed by class and id", subs: []command{
		{name: "call", summary: "call a method on an object (created and woken as needed)", run: objectCall},
		{name: "get", aliases: []string{"show"}, summary: "show an object's status and storage", run: objectGet},
		{name: "ls", aliases: []string{"list"}, summary: "list objects", run: objectList},
		{name: "rm", aliases: []string{"delete"}, summary: "delete an object with its storage, alarms and sandbox", run: objectVerb("rm", "deleted", func(ctx context.Context, c *agentkernel.Client, class, id string) (any, error) {
			return nil, c.Objects.Delete(ctx, class, id)
		})},
		{name: "alarm", aliases: []string{"alarms"}, summary: "scheduled method calls", subs: []command{
			{name: "set", summary: "schedule a method call and print the alarm's id", run: objectAlarm("set")},
			{name: "ls", aliases: []string{"list"}, summary: "list an object's alarms", run: objectAlarm("ls")},
			{name: "rm", aliases: []string{"delete"}, summary: "delete an alarm", run: objectAlarm("rm")},
		}},
		{name: "hibernate", summary: "persist an object's storage and stop its sandbox now", run: objectVerb("hibernate", "hibernated", func(ctx context.Context, c *agentkernel.Client, class, id string) (any, error) {
			return c.Objects.Hibernate(ctx, class, id)
		})},
		{name: "checkpoint", summary: "persist an object's storage without hibernating", run: objectVerb("checkpoint", "checkpointed", func(ctx context.Context, c *agentkernel.Client, class, id string) (any, error) {
			return c.Objects.Checkpoint(ctx, class, id)
		})},
		{name: "define", summary: "define a class from a JSON file and print its name", run: objectDefine},
		{name: "bundle", summary: "the app of a class defined through the API, mounted read-only at /app", subs: []command{
			{name: "push", aliases: []string{"upload"}, summary: "upload a directory (packed as tar.gz) or a tar, tar.gz or tar.zst as a class's bundle", run: objectBundlePush},
			{name: "get", aliases: []string{"show"}, summary: "show a class's bundle", run: objectBundleGet},
			{name: "rm", aliases: []string{"delete"}, summary: "delete a class's bundle", run: objectBundleRm},
		}},
		{name: "classes", summary: "list the classes you can use", run: objectClasses},
		{name: "init", summary: "write a starter object server (go, python or node) into a directory", run: runObjectInit},
	}}
}

// objectVerb is a command that takes CLASS ID.
func objectVerb(verb, done string, op func(ctx context.Context, c *agentkernel.Client, class, id string) (any, error)) runFunc {
	return func(ctx context.Context, m *Main, args []string) error {
		return objectTwo(ctx, m, args, verb, done, op)
	}
}

func objectCall(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("object call", "object call CLASS ID METHOD [--args JSON]")
	var cf clientFlags
	cf.register(fs)
	argsJSON := fs.String("args", "", `the method's args as JSON, e.g. '{"amount": 5}'`)
	if err := parse(fs, interleave(args, map[string]bool{"args": true, "url": true, "api-key": true, "home": true})); err != nil {
		return err
	}
	if fs.NArg() != 3 {
		return fmt.Errorf("%w: object call takes CLASS ID METHOD", errUsage)
	}
	call := agentkernel.ObjectCall{Method: fs.Arg(2)}
	if *argsJSON != "" {
		var v json.RawMessage
		if err := json.Unmarshal([]byte(*argsJSON), &v); err != nil {
			return fmt.Errorf("%w: --args is not JSON: %v", errUsage, err)
		}
		call.Args = v
	}
	res, err := cf.client(m).Objects.Call(ctx, fs.Arg(0), fs.Arg(1), call)
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, res.String())
	return nil
}

func objectGet(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("object get", "object get CLASS ID [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, interleave(args, clientValueFlags)); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: object get takes CLASS ID", errUsage)
	}
	o, err := cf.client(m).Objects.Get(ctx, fs.Arg(0), fs.Arg(1))
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, o)
	}
	fmt.Fprintf(m.Stdout, "object   %s/%s\nstatus   %s\nsandbox  %s\nmode     %s\nkeys     %d (%d bytes)\n",
		o.Class, o.ID, o.Status, o.SandboxID, orDash(o.StorageMode), o.StorageKeys, o.StorageBytes)
	keys := make([]string, 0, len(o.Storage))
	for k := range o.Storage {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([][]string, 0, len(keys))
	for _, k := range keys {
		v := string(o.Storage[k])
		if len(v) > 80 {
			v = v[:77] + "..."
		}
		rows = append(rows, []string{k, v})
	}
	if len(rows) > 0 {
		fmt.Fprintf(m.Stdout, "storage (%s):\n", orDash(o.StorageSource))
		return table(m.Stdout, []string{"KEY", "VALUE"}, rows)
	}
	return nil
}

func objectList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("object ls", "object ls [--class CLASS] [--status Active|Hibernating] [--json]")
	var cf clientFlags
	cf.register(fs)
	var p agentkernel.ObjectListParams
	fs.StringVar(&p.Class, "class", "", "only objects of this class")
	fs.StringVar(&p.Status, "status", "", "only Active or Hibernating objects")
	if err := parse(fs, args); err != nil {
		return err
	}
	list, err := cf.client(m).Objects.List(ctx, p)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, list)
	}
	rows := make([][]string, 0, len(list))
	for _, o := range list {
		last := "-"
		if o.LastCallAt != nil {
			last = o.LastCallAt.Format(time.RFC3339)
		}
		rows = append(rows, []string{o.Class, o.ID, o.Status, fmt.Sprint(o.StorageKeys), last})
	}
	return table(m.Stdout, []string{"CLASS", "ID", "STATUS", "KEYS", "LAST CALL"}, rows)
}

// objectTwo runs a CLASS ID verb.
func objectTwo(ctx context.Context, m *Main, args []string, verb, done string, op func(ctx context.Context, c *agentkernel.Client, class, id string) (any, error)) error {
	fs := m.newFlagSet("object "+verb, "object "+verb+" CLASS ID [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, interleave(args, clientValueFlags)); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: object %s takes CLASS ID", errUsage, verb)
	}
	if verb == "hibernate" {
		fmt.Fprintln(m.Stderr, "persisting storage and stopping the sandbox…")
	}
	out, err := op(ctx, cf.client(m), fs.Arg(0), fs.Arg(1))
	if err != nil {
		return err
	}
	if cf.json && out != nil {
		return printJSON(m.Stdout, out)
	}
	fmt.Fprintf(m.Stdout, "%s %s/%s\n", done, fs.Arg(0), fs.Arg(1))
	return nil
}

// objectAlarm is `object alarm set|ls|rm`; the three share their flags.
func objectAlarm(sub string) runFunc {
	return func(ctx context.Context, m *Main, args []string) error { return objectAlarmRun(ctx, m, sub, args) }
}

func objectAlarmRun(ctx context.Context, m *Main, sub string, rest []string) error {
	fs := m.newFlagSet("object alarm "+sub, "object alarm set CLASS ID METHOD --at RFC3339 [--args JSON] | ls CLASS ID | rm CLASS ID ALARM_ID")
	var cf clientFlags
	cf.register(fs)
	at := fs.String("at", "", "when to fire, RFC 3339 (e.g. 2026-02-16T00:00:00Z), or a delay like 10m")
	argsJSON := fs.String("args", "", "the method's args as JSON")
	if err := parse(fs, interleave(rest, map[string]bool{"at": true, "args": true, "url": true, "api-key": true, "home": true})); err != nil {
		return err
	}
	c := cf.client(m)
	switch sub {
	case "set":
		if fs.NArg() != 3 || *at == "" {
			return fmt.Errorf("%w: object alarm set CLASS ID METHOD --at TIME", errUsage)
		}
		when, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			d, derr := time.ParseDuration(*at)
			if derr != nil {
				return fmt.Errorf("%w: --at %q is neither RFC 3339 nor a duration", errUsage, *at)
			}
			when = time.Now().Add(d)
		}
		p := agentkernel.AlarmParams{Method: fs.Arg(2), FireAt: when}
		if *argsJSON != "" {
			var v json.RawMessage
			if err := json.Unmarshal([]byte(*argsJSON), &v); err != nil {
				return fmt.Errorf("%w: --args is not JSON: %v", errUsage, err)
			}
			p.Args = v
		}
		a, err := c.Objects.SetAlarm(ctx, fs.Arg(0), fs.Arg(1), p)
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(m.Stdout, a)
		}
		fmt.Fprintln(m.Stdout, a.ID)
		return nil
	case "ls":
		if fs.NArg() != 2 {
			return fmt.Errorf("%w: object alarm ls CLASS ID", errUsage)
		}
		list, err := c.Objects.ListAlarms(ctx, fs.Arg(0), fs.Arg(1))
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(m.Stdout, list)
		}
		rows := make([][]string, 0, len(list))
		for _, a := range list {
			rows = append(rows, []string{a.ID, a.Method, a.FireAt.Format(time.RFC3339), fmt.Sprint(a.Fired), fmt.Sprint(a.Attempts), orDash(a.LastError)})
		}
		return table(m.Stdout, []string{"ID", "METHOD", "FIRE AT", "FIRED", "ATTEMPTS", "LAST ERROR"}, rows)
	case "rm":
		if fs.NArg() != 3 {
			return fmt.Errorf("%w: object alarm rm CLASS ID ALARM_ID", errUsage)
		}
		if err := c.Objects.DeleteAlarm(ctx, fs.Arg(0), fs.Arg(1), fs.Arg(2)); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "deleted alarm %s\n", fs.Arg(2))
		return nil
	}
	return fmt.Errorf("%w: unknown alarm subcommand %q (set, ls, rm)", errUsage, sub)
}

func objectDefine(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("object define", "object define FILE.json (a class definition; - reads stdin)")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, interleave(args, clientValueFlags)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: object define takes one FILE.json", errUsage)
	}
	var b []byte
	var err error
	if fs.Arg(0) == "-" {
		b, err = io.ReadAll(m.Stdin)
	} else {
		b, err = os.ReadFile(fs.Arg(0))
	}
	if err != nil {
		return err
	}
	var def agentkernel.ObjectClass
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def); err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	out, err := cf.client(m).Objects.Define(ctx, def)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, out)
	}
	fmt.Fprintf(m.Stderr, "defined class %s\n", out.Class)
	fmt.Fprintln(m.Stdout, out.Class)
	return nil
}

func objectClasses(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("object classes", "object classes [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	list, err := cf.client(m).Objects.Definitions(ctx)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, list)
	}
	rows := make([][]string, 0, len(list))
	for _, c := range list {
		app := "-"
		switch {
		case c.AppDir != "":
			app = "app_dir " + c.AppDir
		case c.Bundle != nil:
			app = "bundle " + c.Bundle.SHA256[:min(12, len(c.Bundle.SHA256))]
		}
		isolation := orDash(c.Isolation)
		if c.Isolation == "class" && c.ObjectsPerSandbox > 0 {
			isolation = fmt.Sprintf("class (%d/sandbox)", c.ObjectsPerSandbox)
		}
		rows = append(rows, []string{c.Class, orDash(c.StorageMode), isolation, orDash(c.Driver), fmt.Sprint(c.IdleTimeoutSeconds), strings.Join(c.InitCommand, " "), app, c.Source})
	}
	return table(m.Stdout, []string{"CLASS", "STORAGE", "ISOLATION", "DRIVER", "IDLE S", "INIT COMMAND", "APP", "SOURCE"}, rows)
}

// clientValueFlags are the shared flags that take a value.
var clientValueFlags = map[string]bool{"url": true, "api-key": true, "home": true}

// interleave moves flags after positional arguments to the front, so
// `object call counter a increment --args '{}'` parses (the flag package
// stops at the first positional argument).
func interleave(args []string, valued map[string]bool) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && valued[name] && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

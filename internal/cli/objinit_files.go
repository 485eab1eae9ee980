package cli

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"text/template"
)

// The templates are copies of objectserver/ and sdk/ (the canonical sources,
// which go:embed cannot reach). TestObjInitTemplatesMatchSources fails when
// they drift; this regenerates them:
//
//go:generate go test -run TestObjInitTemplatesMatchSources -update .

//go:embed objinit_templates
var objInitTemplates embed.FS

// scaffoldFile is one file `object init` writes, relative to DIR.
type scaffoldFile struct {
	path string
	data []byte
	mode fs.FileMode
}

// objInitLang describes one language's scaffold.
type objInitLang struct {
	// dir under objinit_templates/ whose files are copied (".tmpl" dropped).
	dir string
	// initCommand runs the server inside the sandbox, where DIR is /app.
	initCommand []string
	// run and build are the README's instructions for trying it locally.
	build, run string
	// extra files generated here rather than copied.
	extra func(class string) []scaffoldFile
	// manyObjects: the copied helper keeps storage per object id and says
	// so on GET /__health, so the scaffold also runs with isolation =
	// "class" and its README offers that. TestObjectInit* check this
	// against the running scaffold.
	manyObjects bool
}

func objInitLangs() map[string]objInitLang {
	return map[string]objInitLang{
		"go": {
			dir:         "go",
			initCommand: []string{"/app/counter"},
			build:       "CGO_ENABLED=0 go build -o counter .",
			run:         "./counter",
			extra:       goModules,
			manyObjects: true,
		},
		"python": {
			dir:         "python",
			initCommand: []string{"python3", "/app/counter.py"},
			run:         "python3 counter.py",
			manyObjects: true,
		},
		"node": {
			dir:         "node",
			initCommand: []string{"node", "/app/counter.js"},
			run:         "node counter.js",
			manyObjects: true,
		},
	}
}

// goModules makes the scaffold a module that builds offline: main.go imports
// the helper by its real path, and a replace points that path at the copy
// in ./objectserver, so nothing is fetched.
func goModules(class string) []scaffoldFile {
	const helper = "github.com/agentkernel/agentkernel/objectserver"
	return []scaffoldFile{
		{path: "go.mod", mode: 0o644, data: []byte(fmt.Sprintf(
			"module %s\n\ngo 1.22\n\nrequire %s v0.0.0\n\nreplace %s => ./objectserver\n",
			strings.ReplaceAll(class, "_", "-"), helper, helper))},
		{path: "objectserver/go.mod", mode: 0o644, data: []byte(
			"module " + helper + "\n\ngo 1.22\n")},
	}
}

// scaffold returns the files for lang, with the README filled in for class
// and the absolute directory dir.
func scaffold(lang, class, dir string) ([]scaffoldFile, error) {
	l, ok := objInitLangs()[lang]
	if !ok {
		return nil, fmt.Errorf("%w: --lang %q: want go, python or node", errUsage, lang)
	}
	root := path.Join("objinit_templates", l.dir)
	var files []scaffoldFile
	err := fs.WalkDir(objInitTemplates, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := objInitTemplates.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, scaffoldFile{path: strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl"), data: data, mode: 0o644})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read templates: %w", err)
	}
	if l.extra != nil {
		files = append(files, l.extra(class)...)
	}
	readme, err := objInitReadme(lang, class, dir, l)
	if err != nil {
		return nil, err
	}
	return append(files, scaffoldFile{path: "README.md", data: readme, mode: 0o644}), nil
}

func objInitReadme(lang, class, dir string, l objInitLang) ([]byte, error) {
	src, err := objInitTemplates.ReadFile("objinit_templates/README.md.tmpl")
	if err != nil {
		return nil, err
	}
	t, err := template.New("README.md").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("README template: %w", err)
	}
	quoted := make([]string, len(l.initCommand))
	for i, a := range l.initCommand {
		quoted[i] = tomlString(a)
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]any{
		"Lang":        lang,
		"Class":       class,
		"DirTOML":     tomlString(dir),
		"DirShell":    "'" + strings.ReplaceAll(dir, "'", `'\''`) + "'",
		"InitCommand": "[" + strings.Join(quoted, ", ") + "]",
		"Build":       l.build,
		"Run":         l.run,
		"ManyObjects": l.manyObjects,
	})
	if err != nil {
		return nil, fmt.Errorf("README template: %w", err)
	}
	return b.Bytes(), nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\r", `\r`)
	return `"` + r.Replace(s) + `"`
}

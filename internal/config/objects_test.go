package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// app_dir is allowed beside the file that declares it unless app_roots
// says otherwise; [] allows none.
func TestAppRootsDefaultToTheConfigFilesDirectory(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	dir := t.TempDir()
	p := filepath.Join(dir, FileName)
	writeFile(t, p, "[[objects]]\nclass = \"c\"\ninit_command = [\"/app/c\"]\napp_dir = \""+filepath.Join(dir, "c")+"\"\n")
	cfg, _, err := Load(Flags{ConfigPath: p}, []string{"AGENTKERNEL_HOME=" + home})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.DurableObjects.AppRoots, []string{dir}) {
		t.Fatalf("app_roots = %q, want [%q]", cfg.DurableObjects.AppRoots, dir)
	}

	writeFile(t, p, "[durable_objects]\napp_roots = []\n")
	cfg, _, err = Load(Flags{ConfigPath: p}, []string{"AGENTKERNEL_HOME=" + home})
	if err != nil || cfg.DurableObjects.AppRoots == nil || len(cfg.DurableObjects.AppRoots) != 0 {
		t.Fatalf("app_roots = [] gave %q (%v), want none", cfg.DurableObjects.AppRoots, err)
	}

	// No file: no roots (and no [[objects]]).
	cfg, _, err = Load(Flags{}, []string{"AGENTKERNEL_HOME=" + home})
	if err != nil || cfg.DurableObjects.AppRoots != nil {
		t.Fatalf("without a file app_roots = %q (%v)", cfg.DurableObjects.AppRoots, err)
	}

	writeFile(t, p, "[durable_objects]\napp_roots = [\"srv/apps\"]\nmax_bundle_bytes = 0\n")
	_, _, err = Load(Flags{ConfigPath: p}, []string{"AGENTKERNEL_HOME=" + home})
	for _, want := range []string{"durable_objects.app_roots[0]", "absolute", "durable_objects.max_bundle_bytes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// isolation and objects_per_sandbox (issue 15) load, and bad values are
// refused naming the field.
func TestObjectIsolation(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	p := filepath.Join(t.TempDir(), FileName)
	writeFile(t, p, "[[objects]]\nclass = \"c\"\ninit_command = [\"/app/c\"]\nisolation = \"class\"\nobjects_per_sandbox = 50\n")
	cfg, _, err := Load(Flags{ConfigPath: p}, []string{"AGENTKERNEL_HOME=" + home})
	if err != nil || cfg.Objects[0].Isolation != "class" || cfg.Objects[0].ObjectsPerSandbox != 50 {
		t.Fatalf("loaded %+v (%v)", cfg.Objects, err)
	}
	for body, field := range map[string]string{
		"isolation = \"tenant\"\n":                             "objects[0].isolation",
		"objects_per_sandbox = 10\n":                           "objects[0].objects_per_sandbox",
		"isolation = \"class\"\nobjects_per_sandbox = 10001\n": "objects[0].objects_per_sandbox",
		"isolation = \"object\"\nobjects_per_sandbox = 10\n":   "objects[0].objects_per_sandbox",
		"isolation = \"class\"\nobjects_per_sandbox = -1\n":    "objects[0].objects_per_sandbox",
	} {
		writeFile(t, p, "[[objects]]\nclass = \"c\"\ninit_command = [\"/app/c\"]\n"+body)
		_, _, err := Load(Flags{ConfigPath: p}, []string{"AGENTKERNEL_HOME=" + home})
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v does not name %s", body, err, field)
		}
	}
}

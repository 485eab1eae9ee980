package testenv

import (
	"errors"
	"os"
	"sync"
)

// Directories that live as long as the test binary (binaries built once and
// shared by its tests), removed when the tests end. t.TempDir cannot hold
// them: it is removed when the test that made it ends.
var (
	procMu   sync.Mutex
	procDirs []string
	procMain bool
)

// ErrNoMain: ProcessTempDir was called in a test binary whose TestMain does
// not run the tests through Main, so nothing would remove the directory.
var ErrNoMain = errors.New("testenv: this package's TestMain must run the tests through testenv.Main, " +
	"or the directory outlives the test binary")

// ProcessTempDir creates a temp dir (os.MkdirTemp("", pattern)) that Main
// removes after the tests.
func ProcessTempDir(pattern string) (string, error) {
	procMu.Lock()
	defer procMu.Unlock()
	if !procMain {
		return "", ErrNoMain
	}
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	procDirs = append(procDirs, dir)
	return dir, nil
}

// TestingM is *testing.M as goleak.VerifyTestMain takes it.
type TestingM interface{ Run() int }

// Main wraps m so that running the tests also removes every
// ProcessTempDir afterwards:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Main(m)) }
func Main(m TestingM) TestingM {
	procMu.Lock()
	procMain = true
	procMu.Unlock()
	return mainRun{m}
}

type mainRun struct{ m TestingM }

func (r mainRun) Run() int {
	code := r.m.Run()
	procMu.Lock()
	defer procMu.Unlock()
	for _, d := range procDirs {
		_ = os.RemoveAll(d)
	}
	procDirs = nil
	return code
}

package main

import (
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/objectserver/objectservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCounter(t *testing.T) {
	srv := httptest.NewServer(newServer())
	defer srv.Close()
	objectservertest.Counter(t, srv.URL)
}

// The same counter serves many objects (isolation = "class") unchanged.
func TestCounterManyObjects(t *testing.T) {
	srv := httptest.NewServer(newServer())
	defer srv.Close()
	objectservertest.ManyObjects(t, srv.URL)
}

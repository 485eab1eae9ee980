// Command counter is a durable object that counts: increment {"amount": n}
// (default 1), get and reset each answer {"value": n}. The count lives in the
// object's storage under "count", so it survives hibernation.
package main

import (
	"log"
	"net/http"

	"github.com/agentkernel/agentkernel/objectserver"
)

type value struct {
	Value int64 `json:"value"`
}

func main() {
	s := newServer()
	log.Printf("counter object listening on %s", objectserver.Addr())
	log.Fatal(s.ListenAndServe())
}

func newServer() *objectserver.Server {
	s := objectserver.New()
	s.Method("increment", increment)
	s.Method("get", get)
	s.Method("reset", reset)
	return s
}

func increment(c *objectserver.Call) (any, error) {
	args := struct {
		Amount *int64 `json:"amount"`
	}{}
	if err := c.Args(&args); err != nil {
		return nil, objectserver.Errorf(http.StatusBadRequest, "increment: amount must be an integer")
	}
	amount := int64(1)
	if args.Amount != nil {
		amount = *args.Amount
	}
	var n int64
	if _, err := c.Storage().Get("count", &n); err != nil {
		return nil, err
	}
	n += amount
	if err := c.Storage().Put("count", n); err != nil {
		return nil, err
	}
	return value{n}, nil
}

func get(c *objectserver.Call) (any, error) {
	var n int64
	_, err := c.Storage().Get("count", &n)
	return value{n}, err
}

func reset(c *objectserver.Call) (any, error) {
	return value{0}, c.Storage().Delete("count")
}

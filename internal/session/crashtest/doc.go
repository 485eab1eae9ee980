// Package crashtest holds the crash tests of crash-proof turns (seed 003):
// each kills a real `agentkernel serve` (built with -tags failpoints) with
// SIGKILL at an injected point of a turn, restarts it on the same data and
// checks the store and the event stream through the public API. The model
// is a fake Messages API run by the test process, so it outlives the
// daemon.
package crashtest

// Package crashtest checks seed 004's atomicity under SIGKILL against every
// store engine. Its tests re-execute the test binary as a child that writes
// one session in a loop of SaveStateAndPromoteStaging calls; the parent kills
// the child at random moments and, after each kill, reopens the store and
// checks that every write either fully happened or not at all. The package
// has no non-test code; this file only carries the package comment.
package crashtest

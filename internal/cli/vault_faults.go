//go:build !failpoints

package cli

// rekeyHook is nil in production builds; crash tests build with -tags
// failpoints to stop a rotation halfway.
func rekeyHook(string) func(int) { return nil }

// Package version reports the build's version.
package version

import "runtime/debug"

// Version is set at link time (-ldflags "-X …/version.Version=v1.2.3");
// otherwise it comes from the module build info, or "dev".
var Version = ""

// String returns the version.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}

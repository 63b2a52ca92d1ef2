// Package version is what `felix version` and every binary's --version print: the
// release, the commit it was built from and the Go toolchain (issue 23 item 10).
//
// The commit comes from the build's VCS stamp (runtime/debug.ReadBuildInfo "vcs.revision"
// and "vcs.modified", written by `go build` in a git checkout); a release build may set
// both words instead:
//
//	go build -ldflags "-X felix/internal/version.Version=v1.2.0 -X felix/internal/version.Commit=$(git rev-parse HEAD)" ./cmd/...
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release name; "dev" unless set with -ldflags -X.
var Version = "dev"

// Commit overrides the VCS stamp's commit when set with -ldflags -X.
var Commit = ""

// Info is one binary's build identity.
type Info struct {
	Version   string `json:"version"`    // Version
	Commit    string `json:"commit"`     // full commit hash; "unknown" when neither stamped nor set
	Modified  bool   `json:"modified"`   // built from a working tree with uncommitted changes
	BuildTime string `json:"build_time"` // the commit's time (vcs.time, RFC 3339), "" when unknown
	Go        string `json:"go"`         // the Go toolchain, e.g. go1.26.0
}

// Get reads the build identity of the running binary.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		fromSettings(&info, bi.Settings)
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

// fromSettings fills the commit, modified flag and time from the VCS stamp; an -ldflags
// Commit wins over the stamp (and then the stamp's modified flag and time are not its).
func fromSettings(info *Info, settings []debug.BuildSetting) {
	if info.Commit != "" {
		return
	}
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "vcs.time":
			info.BuildTime = s.Value
		}
	}
}

// Line is the one-line text form: "<program> <version> (commit <hash>[, modified], <go>)".
func (i Info) Line(program string) string {
	mod := ""
	if i.Modified {
		mod = ", modified"
	}
	return fmt.Sprintf("%s %s (commit %s%s, %s)", program, i.Version, i.Commit, mod, i.Go)
}

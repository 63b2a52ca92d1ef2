package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVCSStampAndOverride(t *testing.T) {
	stamp := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"},
		{Key: "vcs.time", Value: "2026-12-02T07:00:00Z"}}
	var i Info
	fromSettings(&i, stamp)
	if i.Commit != "abc123" || !i.Modified || i.BuildTime != "2026-12-02T07:00:00Z" {
		t.Fatalf("from the stamp: %+v", i)
	}
	o := Info{Commit: "fffeee"} // -ldflags -X ...Commit wins
	fromSettings(&o, stamp)
	if o.Commit != "fffeee" || o.Modified {
		t.Fatalf("override: %+v", o)
	}
	line := Info{Version: "v1.2.0", Commit: "abc123", Modified: true, Go: "go1.26.0"}.Line("felix")
	if line != "felix v1.2.0 (commit abc123, modified, go1.26.0)" {
		t.Fatalf("line: %q", line)
	}
}

// A test binary has no VCS stamp: the commit is "unknown", never empty.
func TestGetNeverEmpty(t *testing.T) {
	i := Get()
	if i.Commit == "" || i.Version == "" || !strings.HasPrefix(i.Go, "go") {
		t.Fatalf("%+v", i)
	}
}

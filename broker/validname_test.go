package broker

import "testing"

// TestValidNameRefusesDotSegments: "." and ".." are path segments an HTTP
// router cleans away, so a stream named ".." would address its namespace.
func TestValidNameRefusesDotSegments(t *testing.T) {
	for s, want := range map[string]bool{
		".": false, "..": false, "": false, "a/b": false, "a*": false,
		"...": true, ".hidden": true, "orders": true, "v1.2": true,
	} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}

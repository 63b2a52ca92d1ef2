package broker

import (
	"errors"
	"testing"
)

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

// TestNewNamesFollowAuthRules: a name the catalog creates must be one a permission can
// name (auth.ValidName: no space or ':'), or only tenant-wide tokens could reach it (found
// by a new-user trial: `felix stream create 'bad name'` succeeded, then no token could be
// issued for it). A catalog an older build wrote with such a name still loads.
func TestNewNamesFollowAuthRules(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCatalog(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureTenant(Tenant{TenantID: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateNamespace(Namespace{TenantID: "t", Namespace: "n"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"bad name", "a:b", "tab\there"} {
		if _, err := c.CreateStream(Stream{TenantID: "t", Namespace: "n", Stream: bad}, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("stream %q: %v, want ErrInvalid", bad, err)
		}
		if _, err := c.CreateCache(Cache{TenantID: "t", Namespace: "n", Cache: bad}, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("cache %q: %v, want ErrInvalid", bad, err)
		}
		if err := c.CreateNamespace(Namespace{TenantID: "t", Namespace: bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("namespace %q: %v, want ErrInvalid", bad, err)
		}
		if err := c.CreateTenant(Tenant{TenantID: bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("tenant %q: %v, want ErrInvalid", bad, err)
		}
	}
	legacy := `{"version":1,"tenants":[{"tenant_id":"t"}],"namespaces":[{"tenant_id":"t","namespace":"n"}],` +
		`"streams":[{"tenant_id":"t","namespace":"n","stream":"bad name","shards":1}]}`
	if _, err := decodeCatalog([]byte(legacy)); err != nil {
		t.Fatalf("a stored name with a space must still load: %v", err)
	}
}

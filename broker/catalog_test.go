package broker

import (
	"errors"
	"os"
	"testing"
)

func TestCatalogPersistsAndRefusesUnknown(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCatalog(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(Namespace{TenantID: "t1", Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(Stream{TenantID: "t1", Namespace: "missing", Stream: "s"}, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("stream in unknown namespace: %v", err)
	}
	s, err := c.CreateStream(Stream{TenantID: "t1", Namespace: "ns", Stream: "orders", Shards: 2, Durable: true}, nil)
	if err != nil || s.Kind != KindStream || s.Routing != "modulo" {
		t.Fatalf("create: %+v %v", s, err)
	}
	if _, err := c.CreateStream(Stream{TenantID: "t1", Namespace: "ns", Stream: "orders"}, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := c.CreateCache(Cache{TenantID: "t1", Namespace: "ns", Cache: "primary"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteNamespace("t1", "ns"); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("delete non-empty namespace: %v", err)
	}

	again, err := OpenCatalog(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := again.Stream("t1", "ns", "orders")
	if err != nil || got.Shards != 2 || !got.Durable {
		t.Fatalf("reopened stream: %+v %v", got, err)
	}
	if _, err := again.Cache("t1", "ns", "primary"); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Stream("t1", "ns", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown stream: %v", err)
	}
}

func TestCatalogWriteFailureLeavesStateUnchanged(t *testing.T) {
	dir := t.TempDir()
	injected := errors.New("injected: disk full")
	fail := false
	c, err := OpenCatalog(dir, func(path string, data []byte) error {
		if fail {
			return injected
		}
		return WriteFileAtomic(path, data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(Namespace{TenantID: "t", Namespace: "n"}); err != nil {
		t.Fatal(err)
	}
	fail = true
	if _, err := c.CreateCache(Cache{TenantID: "t", Namespace: "n", Cache: "c"}, nil); !errors.Is(err, injected) {
		t.Fatalf("create under failing disk: %v", err)
	}
	if _, err := c.Cache("t", "n", "c"); !errors.Is(err, ErrNotFound) {
		t.Fatal("a cache whose persist failed became visible")
	}
	again, _ := OpenCatalog(dir, nil)
	if len(again.Caches("t", "n")) != 0 || len(again.Namespaces("t")) != 1 {
		t.Fatal("persisted state differs from the last successful write")
	}
}

func TestCatalogShardLimit(t *testing.T) {
	c, _ := OpenCatalog(t.TempDir(), nil)
	c.MaxShards = 4
	c.EnsureNamespace(Namespace{TenantID: "t", Namespace: "n"})
	if _, err := c.CreateStream(Stream{TenantID: "t", Namespace: "n", Stream: "a", Shards: 3}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCache(Cache{TenantID: "t", Namespace: "n", Cache: "c"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(Stream{TenantID: "t", Namespace: "n", Stream: "b"}, nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("fifth shard: %v", err)
	}
	if _, err := c.CreateCache(Cache{TenantID: "t", Namespace: "n", Cache: "d"}, nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("fifth shard (cache): %v", err)
	}
	if err := c.DeleteStream("t", "n", "a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(Stream{TenantID: "t", Namespace: "n", Stream: "b", Shards: 3}, nil); err != nil {
		t.Fatalf("after a delete the room is back: %v", err)
	}
}

func TestCatalogRejectsBadNamesAndDamagedFile(t *testing.T) {
	dir := t.TempDir()
	c, _ := OpenCatalog(dir, nil)
	for _, bad := range []string{"", "a/b", "x*", "\x01"} {
		if err := c.CreateTenant(Tenant{TenantID: bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("tenant %q: %v", bad, err)
		}
	}
	os.WriteFile(CatalogPath(dir), []byte("{not json"), 0o600)
	if _, err := OpenCatalog(dir, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("damaged catalog: %v", err)
	}
}

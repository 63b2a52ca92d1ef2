package meta

import (
	"errors"
	"testing"
)

// FuzzApply: any entry bytes either apply, are refused, or are a
// *FatalError; nothing panics, and a fatal entry leaves the state as it was.
func FuzzApply(f *testing.F) {
	for _, c := range []Command{
		&CreateTenant{TenantID: "t"}, &CreateNamespace{TenantID: "t", Namespace: "n"},
		&RegisterBroker{NodeID: "b", Features: []string{FeatureGenerationStart}, AtMs: 1},
		&CreateStream{TenantID: "t", Namespace: "n", Stream: "s", ReplicationFactor: 1, AtMs: 1},
		&FinalizeFeature{Feature: FeatureGenerationStart, AtMs: 1},
	} {
		e, _ := EncodeEntry(c, BuildMaxLevel)
		f.Add(e)
	}
	f.Fuzz(func(t *testing.T, entry []byte) {
		m := New(Config{})
		for _, c := range []Command{&CreateTenant{TenantID: "t"}, &CreateNamespace{TenantID: "t", Namespace: "n"},
			&RegisterBroker{NodeID: "b", AtMs: 1}} {
			e, _ := EncodeEntry(c, BuildMaxLevel)
			if _, err := m.Apply(m.State().Index()+1, e); err != nil {
				t.Fatal(err)
			}
		}
		before := m.State()
		_, err := m.Apply(before.Index()+1, entry)
		if err != nil {
			if !errors.Is(err, ErrUnreadableEntry) {
				t.Fatalf("untyped error %v", err)
			}
			if m.State() != before {
				t.Fatal("a fatal entry changed the state")
			}
		}
		data, err := m.Snapshot().Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := New(Config{}).Restore(data); err != nil {
			t.Fatalf("own snapshot refused: %v", err)
		}
	})
}

// FuzzRestore: any bytes restore or are a *SnapshotError; nothing panics.
func FuzzRestore(f *testing.F) {
	m := New(Config{})
	e, _ := EncodeEntry(&CreateTenant{TenantID: "t"}, LevelBase)
	_, _ = m.Apply(1, e)
	data, _ := m.Snapshot().Encode()
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := New(Config{}).Restore(data)
		var se *SnapshotError
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

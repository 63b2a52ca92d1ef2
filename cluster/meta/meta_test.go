package meta

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
)

// mustApply proposes cmd (no voters) and applies it at the next index.
func mustApply(t *testing.T, f *FSM, cmd Command) Result {
	t.Helper()
	entry, err := f.Propose(cmd, nil)
	if err != nil {
		t.Fatalf("propose %s: %v", cmd.Kind(), err)
	}
	res, err := f.Apply(f.State().Index()+1, entry)
	if err != nil {
		t.Fatalf("apply %s: %v", cmd.Kind(), err)
	}
	if res.Err != nil {
		t.Fatalf("apply %s: refused: %v", cmd.Kind(), res.Err)
	}
	return res
}

// goldenFSM builds a small state touching every record type.
func goldenFSM(t *testing.T) *FSM {
	f := New(Config{})
	for _, c := range []Command{
		&MemberLevelReport{MemberID: "m1", Level: BuildMaxLevel},
		&CreateTenant{TenantID: "t", DisplayName: "Tenant"},
		&CreateNamespace{TenantID: "t", Namespace: "ns"},
		&RegisterBroker{NodeID: "b1", StorageID: "s1", ClientAddr: "10.0.0.1:4433", InternalAddr: "10.0.0.1:4434",
			Features: []string{FeatureGenerationStart, FeatureStreamIncarnations}, Generations: map[string]uint64{"stream/t/ns/s/0": 3},
			MaxLevel: BuildMaxLevel, AtMs: 1000},
		&RegisterBroker{NodeID: "b2", StorageID: "s2", ClientAddr: "10.0.0.2:4433", InternalAddr: "10.0.0.2:4434",
			Features: []string{FeatureGenerationStart, FeatureStreamIncarnations}, MaxLevel: BuildMaxLevel, AtMs: 1000},
		&FinalizeFeature{Feature: FeatureStreamIncarnations, AtMs: 1000},
		&CreateStream{TenantID: "t", Namespace: "ns", Stream: "s", Shards: 2, ReplicationFactor: 2, Durable: true, AtMs: 1000},
		&CreateCache{TenantID: "t", Namespace: "ns", Cache: "c", ReplicationFactor: 1, AtMs: 1000},
		&DeleteCache{TenantID: "t", Namespace: "ns", Cache: "c"},
		&ReplicaReport{ShardRef: ShardRef{Kind: "stream", TenantID: "t", Namespace: "ns", Name: "s", Shard: 0},
			Leader: "b1", Generation: 4, Replicas: []ReplicaState{{NodeID: "b2", StorageID: "s2", DurableOffset: 42}}, AtMs: 1500},
	} {
		mustApply(t, f, c)
	}
	return f
}

// TestSnapshotGoldenBytes pins the snapshot format (docs/controlplane.md,
// "Snapshot format"): a change to the bytes is a format change and needs a
// new SnapshotVersion. Regenerate with -rewrite and review.
func TestSnapshotGoldenBytes(t *testing.T) {
	data, err := goldenFSM(t).Snapshot().Encode()
	if err != nil {
		t.Fatal(err)
	}
	const path = "testdata/golden_snapshot.hex"
	got := hex.Dump(data)
	if f := flag.Lookup("rewrite"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("snapshot bytes changed (a format change needs a new SnapshotVersion):\n%s", got)
	}
	if !bytes.HasPrefix(data, []byte(SnapshotMagic+"\x00\x01\x00\x00")) {
		t.Fatalf("header %x", data[:8])
	}
	s, epoch, err := DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	again, err := (&Snapshot{State: s, Epoch: epoch}).Encode()
	if err != nil || !bytes.Equal(again, data) {
		t.Fatalf("decode then encode differs (err %v)", err)
	}
}

// TestSnapshotIsPointInTime: a snapshot taken before later Applies keeps
// its state (copy-on-write), and encodes as it did.
func TestSnapshotIsPointInTime(t *testing.T) {
	f := goldenFSM(t)
	snap := f.Snapshot()
	before, _ := snap.Encode()
	mustApply(t, f, &DeleteStream{TenantID: "t", Namespace: "ns", Stream: "s"})
	mustApply(t, f, &CreateTenant{TenantID: "u"})
	mustApply(t, f, &Heartbeat{NodeID: "b1", Draining: true, AtMs: 2000})
	if n := len(snap.State.Streams()); n != 1 {
		t.Fatalf("snapshot streams = %d, want 1", n)
	}
	if n := len(f.State().Streams()); n != 0 {
		t.Fatalf("live streams = %d, want 0", n)
	}
	if b, _ := snap.State.Broker("b1"); b.Draining {
		t.Fatal("snapshot broker changed")
	}
	after, _ := snap.Encode()
	if !bytes.Equal(before, after) {
		t.Fatal("snapshot bytes changed after later applies")
	}
}

// TestRestoreRefusesEveryCorruption flips each byte of a snapshot in turn:
// every flip is refused with a *SnapshotError and the state is unchanged.
func TestRestoreRefusesEveryCorruption(t *testing.T) {
	data, _ := goldenFSM(t).Snapshot().Encode()
	f := New(Config{})
	mustApply(t, f, &CreateTenant{TenantID: "keep"})
	for i := range data {
		bad := slices.Clone(data)
		bad[i] ^= 0x20
		var se *SnapshotError
		if err := f.Restore(bad); !errors.As(err, &se) {
			t.Fatalf("flip at %d: %v, want a *SnapshotError", i, err)
		}
	}
	if err := f.Restore(data[:len(data)-1]); err == nil {
		t.Fatal("a truncated snapshot restored")
	}
	if ts := f.State().Tenants(); len(ts) != 1 || ts[0].TenantID != "keep" {
		t.Fatalf("state changed by refused restores: %v", ts)
	}
}

// TestRegistrationMessageIsTheSeeds: the seed's example, word for word
// ("A new cluster: the first broker's configuration wins").
func TestRegistrationMessageIsTheSeeds(t *testing.T) {
	seed := `node broker-2 does not support fleet feature(s) lease_free_reads that the
fleet has enabled; run a build that has them, since an enabled feature cannot
be disabled; a broker started with FELIX_QUORUM_READS=lease does not support
lease_free_reads: unset FELIX_QUORUM_READS (the default reads by a round) and
restart the broker`
	want := strings.ReplaceAll(seed, "\n", " ")
	e := &RegistrationError{NodeID: "broker-2", Missing: []string{FeatureLeaseFreeReads},
		Settings: map[string]string{"FELIX_QUORUM_READS": "lease"}}
	if e.Error() != want {
		t.Fatalf("got  %q\nwant %q", e.Error(), want)
	}
	fence := (&RegistrationError{NodeID: "broker-2", Missing: []string{FeatureMajorityAck},
		Settings: map[string]string{"FELIX_INTERNAL_FENCE": "false"}}).Error()
	if !strings.Contains(fence, "majority_ack") || !strings.Contains(fence, "unset FELIX_INTERNAL_FENCE") ||
		strings.Contains(fence, "FELIX_QUORUM_READS") {
		t.Fatalf("fence message %q", fence)
	}
	if StatusOf(e) != 409 {
		t.Fatalf("status %d", StatusOf(e))
	}
}

// TestUnknownKindIsFatal: the error the Raft wrapper turns into "log and
// exit" is typed, and the state does not move.
func TestUnknownKindIsFatal(t *testing.T) {
	f := New(Config{})
	_, err := f.Apply(1, []byte{0x7f, 0xff, 0, 1, '{', '}'})
	var fe *FatalError
	if !errors.As(err, &fe) || !errors.Is(err, ErrUnreadableEntry) || fe.Kind != 0x7fff || fe.Reason != "unknown kind" {
		t.Fatalf("err %v", err)
	}
	if f.State().Index() != 0 {
		t.Fatal("index moved")
	}
	if _, err := f.Apply(0, nil); !errors.Is(err, ErrUnreadableEntry) {
		t.Fatalf("short entry at index 0: %v", err)
	}
}

// TestRemovalsOnlyByTombstone: after a restore to a state that lacks a name
// the broker holds, nothing is removed; a tombstoned name at the held
// incarnation is; a newer incarnation of a recreated name is kept.
func TestRemovalsOnlyByTombstone(t *testing.T) {
	f := goldenFSM(t) // stream t/ns/s at incarnation 1; cache t/ns/c deleted at incarnation 0
	held := []Held{
		{Kind: "stream", TenantID: "t", Namespace: "ns", Name: "s", Incarnation: 1},
		{Kind: "stream", TenantID: "t", Namespace: "ns", Name: "gone-without-tombstone"},
		{Kind: "cache", TenantID: "t", Namespace: "ns", Name: "c"},
	}
	got := Removals(f.State(), held)
	if len(got) != 1 || got[0].Name != "c" {
		t.Fatalf("removals %v, want only cache c", got)
	}
	mustApply(t, f, &DeleteStream{TenantID: "t", Namespace: "ns", Stream: "s"})
	mustApply(t, f, &CreateStream{TenantID: "t", Namespace: "ns", Stream: "s", AtMs: 1000})
	got = Removals(f.State(), append(held, Held{Kind: "stream", TenantID: "t", Namespace: "ns", Name: "s", Incarnation: 2}))
	if len(got) != 2 || got[0].Name != "s" || got[0].Incarnation != 1 || got[1].Name != "c" {
		t.Fatalf("removals %v, want stream s at incarnation 1 and cache c", got)
	}
}

package upgrade

import (
	"testing"
	"time"

	"felix/cluster/meta"
)

// TestCreateRacingJumpHashFinalize is what TestControlPlaneREST hit in 2 of 14 runs (a
// v0.1.0 control plane, which still has the bug): a stream create naming no routing,
// proposed while jump_hash_routing is not enabled and applied after its finalize (the
// new-cluster rule's, or an operator's during a roll), was refused 409 entry_level ("a
// jump_hash stream needs an entry at metadata level 3; this one is at 1"): FSM.Propose took
// the entry's level from the proposer's state (modulo: level 1) while apply picked the
// routing on the applied state (jump_hash). Fixed in cluster/meta: with every voter at 3 the
// entry is written at 3 and apply's default holds, so the stream is jump_hash, as the log
// orders it after the finalize (cluster/meta/testdata/scripts/create_racing_finalize.txt
// covers a group with an older member too).
func TestCreateRacingJumpHashFinalize(t *testing.T) {
	f := meta.New(meta.Config{})
	voters := []string{"cp1"}
	index := uint64(0)
	apply := func(entry []byte) meta.Result {
		t.Helper()
		index++
		res, err := f.Apply(index, entry)
		if err != nil {
			t.Fatalf("apply entry %d: %v", index, err)
		}
		return res
	}
	propose := func(cmd meta.Command) []byte {
		t.Helper()
		e, err := f.Propose(cmd, voters)
		if err != nil {
			t.Fatalf("propose %T: %v", cmd, err)
		}
		return e
	}
	now := time.Now().UnixMilli()
	for _, cmd := range []meta.Command{
		&meta.MemberLevelReport{MemberID: "cp1", Level: meta.BuildMaxLevel},
		&meta.RegisterBroker{NodeID: "b1.felix", Features: []string{meta.FeatureJumpHashRouting}, MaxLevel: meta.BuildMaxLevel, AtMs: now},
		&meta.CreateTenant{TenantID: "t1"}, &meta.CreateNamespace{TenantID: "t1", Namespace: "n1"},
	} {
		if res := apply(propose(cmd)); res.Err != nil {
			t.Fatalf("%T: %v", cmd, res.Err)
		}
	}
	create := propose(&meta.CreateStream{TenantID: "t1", Namespace: "n1", Stream: "orders"}) // before the finalize
	if res := apply(propose(&meta.FinalizeFeature{Feature: meta.FeatureJumpHashRouting, AtMs: now})); res.Err != nil {
		t.Fatalf("finalize: %v", res.Err)
	}
	res := apply(create)
	if res.Err != nil {
		t.Fatalf("a create proposed before jump_hash_routing's finalize and applied after it: %v", res.Err)
	}
	if st, ok := res.Value.(meta.Stream); !ok || st.Routing != "jump_hash" {
		t.Fatalf("a create applied after jump_hash_routing's finalize gave %+v, want a jump_hash stream", res.Value)
	}
}

package broker

import "felix/core"

// Temporary mirrors of core's per-shard API (issue 14 item 1) until it lands; replaced by
// core.Role, core.ShardSpec and core.ShardState.
type shardRole uint8

const (
	roleLeader   shardRole = 1
	roleFollower shardRole = 2
)

type shardSpec struct {
	Stream *core.StreamSpec
	Cache  *core.CacheSpec
}

type shardState struct {
	Ref        core.ShardRef
	Role       shardRole
	Generation uint64
}

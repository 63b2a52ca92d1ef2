package auth

import "strconv"

// Action is a permission verb of spec/auth.md §2. The zero value is not an action.
type Action uint8

// The actions of spec/auth.md §2. Data-plane checks (spec §4):
//
//	publish, publish_batch, binary publish          ActionStreamPublish
//	subscribe, group poll/ack/nack/dead letters/redrive  ActionStreamSubscribe
//	cache get, counter get, cache watch              ActionCacheRead
//	cache put, delete, counter add (every other op)  ActionCacheWrite
const (
	ActionStreamPublish Action = iota + 1
	ActionStreamSubscribe
	ActionCacheRead
	ActionCacheWrite
	ActionStreamManage
	ActionCacheManage
	ActionNamespaceManage
	ActionTenantManage
	ActionRBACView
	ActionRBACPolicyManage
	ActionRBACAssignmentManage
	actionLimit // one past the last action; sizes per-action tables
)

var actionNames = [actionLimit]string{
	ActionStreamPublish:        "stream.publish",
	ActionStreamSubscribe:      "stream.subscribe",
	ActionCacheRead:            "cache.read",
	ActionCacheWrite:           "cache.write",
	ActionStreamManage:         "stream.manage",
	ActionCacheManage:          "cache.manage",
	ActionNamespaceManage:      "ns.manage",
	ActionTenantManage:         "tenant.manage",
	ActionRBACView:             "rbac.view",
	ActionRBACPolicyManage:     "rbac.policy.manage",
	ActionRBACAssignmentManage: "rbac.assignment.manage",
}

// objectKind is the object family an action applies to (spec/auth.md §1 object strings).
type objectKind uint8

const (
	kindNone objectKind = iota
	kindTenant
	kindNamespace
	kindStream
	kindCache
)

var kindPrefixes = [...]string{kindTenant: "tenant:", kindNamespace: "namespace:", kindStream: "stream:", kindCache: "cache:"}

// String returns the spec spelling ("stream.publish", ...), or "action(N)" for a value
// that is not an action.
func (a Action) String() string {
	if a.Valid() {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Valid reports whether a is one of the defined actions.
func (a Action) Valid() bool { return a > 0 && a < actionLimit }

// kind returns the object family the action is checked against.
func (a Action) kind() objectKind {
	switch a {
	case ActionStreamPublish, ActionStreamSubscribe, ActionStreamManage:
		return kindStream
	case ActionCacheRead, ActionCacheWrite, ActionCacheManage:
		return kindCache
	case ActionNamespaceManage:
		return kindNamespace
	case ActionTenantManage, ActionRBACView, ActionRBACPolicyManage, ActionRBACAssignmentManage:
		return kindTenant
	}
	return kindNone
}

// ParseAction maps the spec spelling of an action to its Action. Unknown spellings return
// ok=false.
func ParseAction(s string) (Action, bool) {
	for a := ActionStreamPublish; a < actionLimit; a++ {
		if actionNames[a] == s {
			return a, true
		}
	}
	return 0, false
}

// CacheOpAction returns the action a cache operation needs: ActionCacheRead for a read-only
// operation (Get, CounterGet, Watch), ActionCacheWrite for every other one (Put, Delete,
// CounterAdd). seeds/internal-protocol.txt, "Forwarded cache operation"; spec/auth.md §4.
func CacheOpAction(readOnly bool) Action {
	if readOnly {
		return ActionCacheRead
	}
	return ActionCacheWrite
}

func quote(s string) string { return strconv.Quote(s) }

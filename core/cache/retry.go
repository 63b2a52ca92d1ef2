package cache

import "fmt"

// OpKind is a cache operation as the forwarded cache op numbers it
// (spec/internal-protocol-kinds.md, "Cache op codes": CounterAdd = 4 and
// CounterGet = 5 are seed facts; Put = 1, Get = 2, Delete = 3 are the
// project's choice).
type OpKind uint8

// Cache operation kinds.
const (
	KindPut        OpKind = 1
	KindGet        OpKind = 2
	KindDelete     OpKind = 3
	KindCounterAdd OpKind = 4
	KindCounterGet OpKind = 5
)

// String names the kind.
func (k OpKind) String() string {
	switch k {
	case KindPut:
		return "put"
	case KindGet:
		return "get"
	case KindDelete:
		return "delete"
	case KindCounterAdd:
		return "counter_add"
	case KindCounterGet:
		return "counter_get"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// SafeToResend reports whether an operation whose answer was lost (timeout,
// dropped connection or forward) may be sent again as is
// (seeds/internal-protocol.txt, "Forwarded cache operation"): Get, Delete and
// CounterGet land on the same state twice; a second Put restarts the TTL clock
// and a second CounterAdd adds twice, so for those the broker and the SDK
// report ErrIndeterminate and let the caller decide. Unknown kinds: false.
func SafeToResend(k OpKind) bool {
	switch k {
	case KindGet, KindDelete, KindCounterGet:
		return true
	}
	return false
}

// NeedsWrite reports whether k needs the cache.write permission rather than
// cache.read (spec/internal-protocol-kinds.md: Get and CounterGet read,
// everything else writes).
func NeedsWrite(k OpKind) bool { return k != KindGet && k != KindCounterGet }

package cache

import (
	"bytes"
	"errors"
)

// ErrWatchExists is returned by Shard.Watch for an id already registered.
var ErrWatchExists = errors.New("cache: watch id already registered")

// Watch selects the keys a watch follows (spec/client-protocol.md §8.4):
// exactly Key, or with Prefix every key starting with Key (an empty prefix
// follows every key of the shard).
type Watch struct {
	Key    []byte
	Prefix bool
}

// Matches reports whether key is followed by w.
func (w Watch) Matches(key []byte) bool {
	if w.Prefix {
		return bytes.HasPrefix(key, w.Key)
	}
	return bytes.Equal(key, w.Key)
}

// ChangeFromRecord turns one cache-log payload read at offset into the
// Change a watch w sees, for resuming a watch from an offset below the live
// tail (the engine reads history with seglog and then joins live delivery).
// ok is false when the record is not a change w follows: a key it does not
// match, or compaction framing (a compaction restates the live set; it
// changes nothing, so watchers do not see it). Key and Value alias payload.
// Errors wrap ErrCorruptRecord.
func ChangeFromRecord(w Watch, watchID, offset uint64, payload []byte) (Change, bool, error) {
	r, err := DecodeRecord(payload)
	if err != nil {
		return Change{}, false, err
	}
	var op ChangeOp
	switch r.Op {
	case OpPut:
		op = ChangePut
	case OpDelete:
		op = ChangeDelete
	case OpExpire:
		op = ChangeExpire
	case OpEvict:
		op = ChangeEvict
	default:
		return Change{}, false, nil
	}
	if !w.Matches(r.Key) {
		return Change{}, false, nil
	}
	c := Change{WatchID: watchID, Op: op, Key: r.Key, Offset: offset}
	if op == ChangePut {
		c.Value = r.Value
	}
	return c, true, nil
}

// watchSet is the registry of a shard's watches: exact keys in a map, prefixes
// in a slice scanned per change (watches are few; values are many).
type watchSet struct {
	byID     map[uint64]watchReg
	exact    map[string][]uint64
	prefixes []prefixWatch
}

type watchReg struct {
	key    string
	prefix bool
}

type prefixWatch struct {
	id     uint64
	prefix string
}

// empty reports whether no watch is registered (the hot path's test).
func (w *watchSet) empty() bool { return len(w.byID) == 0 }

func (w *watchSet) add(id uint64, key []byte, prefix bool) error {
	if _, dup := w.byID[id]; dup {
		return ErrWatchExists
	}
	if w.byID == nil {
		w.byID = make(map[uint64]watchReg)
		w.exact = make(map[string][]uint64)
	}
	k := string(key)
	w.byID[id] = watchReg{key: k, prefix: prefix}
	if prefix {
		w.prefixes = append(w.prefixes, prefixWatch{id: id, prefix: k})
	} else {
		w.exact[k] = append(w.exact[k], id)
	}
	return nil
}

func (w *watchSet) remove(id uint64) bool {
	reg, ok := w.byID[id]
	if !ok {
		return false
	}
	delete(w.byID, id)
	if reg.prefix {
		for i, p := range w.prefixes {
			if p.id == id {
				w.prefixes = append(w.prefixes[:i], w.prefixes[i+1:]...)
				break
			}
		}
		return true
	}
	ids := w.exact[reg.key]
	for i, x := range ids {
		if x == id {
			ids = append(ids[:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(w.exact, reg.key)
	} else {
		w.exact[reg.key] = ids
	}
	return true
}

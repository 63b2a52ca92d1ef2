package meta

import (
	"fmt"
	"sort"
)

// The change operations.
const (
	OpUpsert = "upsert"
	OpDelete = "delete"
)

// Change is one change-feed row (issue 17 item 3, "the change feed"): Seq is
// the Raft index of the entry that made it (one entry can make several
// rows), Entity one of tenant, namespace, stream, cache, tombstone, broker,
// assignment, feature, member, Key the entity's key, Value the new value
// (nil for a delete). Heartbeats (unless draining changes) and replica
// reports make no rows.
type Change struct {
	Seq    uint64 `json:"seq"`
	Entity string `json:"entity"`
	Op     string `json:"op"`
	Key    string `json:"key"`
	Value  any    `json:"value,omitempty"`
}

// Page is one Changes answer: the feed epoch, the rows after the cursor,
// and Last, the cursor to ask after next (the last row's Seq, or the state's
// index when no rows are left).
type Page struct {
	Epoch   uint64   `json:"epoch"`
	Changes []Change `json:"changes"`
	Last    uint64   `json:"last"`
}

// GoneError answers a cursor the feed cannot serve (410 Gone): After is
// older than what is kept (rows through Through were dropped by retention or
// predate the last restore), or, Ahead, newer than the state (a broker ahead
// of a control plane restored from an older snapshot). Either way the broker
// reloads GET /v1/snapshot; Epoch is the feed's current epoch.
type GoneError struct {
	After   uint64
	Through uint64
	Ahead   bool
	Epoch   uint64
}

// Error names the cursor and what is kept.
func (e *GoneError) Error() string {
	if e.Ahead {
		return fmt.Sprintf("change feed: cursor %d is ahead of the control plane (epoch %d); reload the snapshot", e.After, e.Epoch)
	}
	return fmt.Sprintf("change feed: cursor %d is older than what is kept (through %d; epoch %d); reload the snapshot",
		e.After, e.Through, e.Epoch)
}

// HTTPStatus is 410.
func (e *GoneError) HTTPStatus() int { return 410 }

// feed keeps the last retention rows. through is the highest Seq no longer
// served (dropped rows, or the index a restore started from).
type feed struct {
	rows      []Change
	retention int
	through   uint64
	epoch     uint64
}

func (f *feed) append(ch []Change) {
	f.rows = append(f.rows, ch...)
	if drop := len(f.rows) - f.retention; drop > 0 {
		f.through = f.rows[drop-1].Seq
		f.rows = f.rows[drop:] // no copy: the next growing append moves only the kept rows
	}
}

// Epoch gives the feed epoch: it changes when the state is restored from a
// snapshot older than the state it replaces, so a broker holding a cursor of
// the old history reloads instead of waiting for indexes that will mean
// something else.
func (f *FSM) Epoch() uint64 { return f.feed.epoch }

// Changes gives up to max rows with Seq above after (max <= 0: every row
// kept); rows of one entry are never split across pages, so a page can hold
// more than max when one entry made more rows. Errors: *GoneError (410).
func (f *FSM) Changes(after uint64, max int) (Page, error) {
	fd := &f.feed
	if after < fd.through {
		return Page{}, &GoneError{After: after, Through: fd.through, Epoch: fd.epoch}
	}
	if after > f.state.index {
		return Page{}, &GoneError{After: after, Through: fd.through, Ahead: true, Epoch: fd.epoch}
	}
	i := sort.Search(len(fd.rows), func(i int) bool { return fd.rows[i].Seq > after })
	rest := fd.rows[i:]
	n := len(rest)
	if max > 0 && n > max {
		n = max
		for n > 0 && n < len(rest) && rest[n].Seq == rest[n-1].Seq {
			n--
		}
		if n == 0 {
			for n < len(rest) && rest[n].Seq == rest[0].Seq {
				n++
			}
		}
	}
	p := Page{Epoch: fd.epoch, Changes: append([]Change(nil), rest[:n]...), Last: f.state.index}
	if n < len(rest) {
		p.Last = rest[n-1].Seq
	}
	return p, nil
}

package seglog

import "fmt"

// WriteAfter orders l's writes after dep's: no write of l starts until every
// record that dep held when the records in it were appended to l has reached
// dep's file. A process killed at any moment then leaves on disk, for every
// batch of l, at least what dep held when that batch was appended.
//
// The core uses it for a stream shard's record log (l) and its producer key
// log (dep): a batch's key is staged before its records, so a SIGKILL can
// leave a key without its records (recovery drops it) but never records
// without their key (which a re-send after the restart would store a second
// time; docs/soak.md, "Failure history"). Only write order is given, not
// fdatasync order: see docs/storage-format.md, "Producer keys before records".
//
// A dep opened Buffered completes its writes inside the Flush that starts
// them, so the gate costs l no extra I/O wait. When dep fails, l fails at
// once with an ErrStorageFailed naming dep (what it waits for will never land).
//
// Both logs must belong to the same Disk; dep must not itself write after a
// log, and each log has at most one of either role. Errors: ErrBadOptions.
func (l *Log) WriteAfter(dep *Log) error {
	switch {
	case dep == nil || dep == l || dep.d != l.d:
		return fmt.Errorf("%w: WriteAfter needs another log of the same Disk", ErrBadOptions)
	case l.dep != nil || l.gated != nil || dep.dep != nil || dep.gated != nil:
		return fmt.Errorf("%w: WriteAfter: %s or %s is already ordered", ErrBadOptions, l.dir, dep.dir)
	}
	l.dep, dep.gated = dep, l
	return nil
}

// gateShut reports whether u must wait for l's dependency.
func (l *Log) gateShut(u *unit) bool {
	if l.dep == nil {
		return false
	}
	// A gate beyond the dependency's end (it was truncated since) waits for
	// nothing that can still land.
	return l.dep.landed < min(u.gate, l.dep.next)
}

// gateOpen reports whether u may be written now. A shut gate first pushes
// the dependency's staged write (a plain pwrite lands at once); when it is
// still shut, the dependency's completion marks l pending again.
func (l *Log) gateOpen(u *unit) (bool, error) {
	if !l.gateShut(u) {
		return true, nil
	}
	dep := l.dep
	if dep.failed == nil && !dep.closed {
		if err := dep.submit(); err != nil {
			return false, err
		}
	}
	return !l.gateShut(u), nil
}

package sim

import (
	"fmt"
	"strings"
)

// Crash stops node id now: its machine and everything it held in memory are
// gone, every file on its disk loses its unsynced suffix under mode (cut
// points drawn from the run's generator, see Disk), and copies in flight to
// it are dropped when they arrive while it is down. Copies it sent before
// the crash are still delivered. Errors: ErrUnknownNode, ErrNodeDown.
func (s *Sim[M]) Crash(id NodeID, mode CutMode) error {
	n, ok := s.nodes[id]
	if !ok {
		return fmt.Errorf("%w %v", ErrUnknownNode, id)
	}
	if n.machine == nil {
		return fmt.Errorf("%w: %v", ErrNodeDown, id)
	}
	n.machine = nil
	notes := n.disk.crash(mode, s.rand)
	s.stats.Crashes++
	detail := ""
	if len(notes) > 0 {
		detail = " (" + strings.Join(notes, "; ") + ")"
	}
	s.tracef("%v crash %v cut=%v%s", s.now, id, mode, detail)
	s.check(fmt.Sprintf("crash %v", id))
	return nil
}

// Restart starts crashed node id again: the Factory builds a new machine
// from the disk that survived (Env.Incarnation one higher), and its Start,
// if any, runs. Errors: ErrUnknownNode, ErrNodeUp.
func (s *Sim[M]) Restart(id NodeID) error {
	n, ok := s.nodes[id]
	if !ok {
		return fmt.Errorf("%w %v", ErrUnknownNode, id)
	}
	if n.machine != nil {
		return fmt.Errorf("%w: %v", ErrNodeUp, id)
	}
	n.incarnation++
	s.stats.Restarts++
	s.tracef("%v restart %v inc=%d disk=[%v]", s.now, id, n.incarnation, n.disk)
	s.boot(n)
	s.check(fmt.Sprintf("restart %v", id))
	return nil
}

// CorruptFile flips one byte of file name on node id's disk (bit rot: the
// position and mask are drawn from the run's generator), whether or not the
// node is up; a running machine sees it on its next read, a restarted one
// in recovery, and its checksums must catch it. It returns the trace note
// ("byte I ^0xMM", or "empty" for an empty file). Errors: ErrUnknownNode,
// ErrNoFile.
func (s *Sim[M]) CorruptFile(id NodeID, name string) (string, error) {
	n, ok := s.nodes[id]
	if !ok {
		return "", fmt.Errorf("%w %v", ErrUnknownNode, id)
	}
	f, ok := n.disk.Lookup(name)
	if !ok {
		return "", fmt.Errorf("%w: %v on node %v", ErrNoFile, name, id)
	}
	note := f.flipByte(s.rand)
	s.tracef("%v corrupt-file %v %s (%s)", s.now, id, name, note)
	s.check(fmt.Sprintf("corrupt-file %v %s", id, name))
	return note, nil
}

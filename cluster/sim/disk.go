package sim

import (
	"fmt"
	"slices"
	"strings"
)

// Disk is one node's simulated durable storage: named append-only files,
// each with a synced length. It belongs to the simulator, not to the machine,
// so it outlives the machine across a crash.
//
// Fault model (what a crash does, see Sim.Crash and CutMode): bytes up to a
// file's synced length always survive; the unsynced suffix survives in full
// (CutKeep, a process crash with the page cache intact), not at all
// (CutLose), or up to a random byte (CutRandom, the default: a power loss,
// possibly in the middle of a record, so recovery must find a torn tail).
// Synced bytes are never corrupted by a crash; Sim.CorruptFile damages
// stored bytes on purpose (bit rot). A Disk is not safe for
// concurrent use; the simulator is single-goroutine.
type Disk struct {
	files map[string]*File
}

// NewDisk returns an empty disk.
func NewDisk() *Disk { return &Disk{files: map[string]*File{}} }

// File returns the file called name, creating it empty on first use.
func (d *Disk) File(name string) *File {
	f, ok := d.files[name]
	if !ok {
		f = &File{name: name}
		d.files[name] = f
	}
	return f
}

// Lookup returns the file called name and whether it exists.
func (d *Disk) Lookup(name string) (*File, bool) {
	f, ok := d.files[name]
	return f, ok
}

// Names returns the names of the disk's files, sorted.
func (d *Disk) Names() []string {
	names := make([]string, 0, len(d.files))
	for n := range d.files {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// String describes every file as "name len=N synced=S", sorted by name, or
// "empty".
func (d *Disk) String() string {
	if len(d.files) == 0 {
		return "empty"
	}
	parts := make([]string, 0, len(d.files))
	for _, n := range d.Names() {
		f := d.files[n]
		parts = append(parts, fmt.Sprintf("%s len=%d synced=%d", n, f.Len(), f.Synced()))
	}
	return strings.Join(parts, ", ")
}

// crash cuts every file's unsynced suffix under mode, drawing random cut
// points from r in file-name order. It returns one "name: kept K of U
// unsynced bytes" note per file that had unsynced bytes.
func (d *Disk) crash(mode CutMode, r *Rand) []string {
	var notes []string
	for _, n := range d.Names() {
		f := d.files[n]
		unsynced := len(f.data) - f.synced
		if unsynced == 0 {
			continue
		}
		keep := unsynced
		switch mode {
		case CutLose:
			keep = 0
		case CutRandom:
			keep = r.IntN(unsynced + 1)
		}
		f.data = f.data[:f.synced+keep]
		f.synced = len(f.data)
		notes = append(notes, fmt.Sprintf("%s: kept %d of %d unsynced bytes", n, keep, unsynced))
	}
	return notes
}

// File is one simulated file: bytes written so far and how many of them a
// Sync made durable. Offsets and lengths are in bytes.
type File struct {
	name   string
	data   []byte
	synced int
}

// Name returns the file's name.
func (f *File) Name() string { return f.name }

// Append writes b at the end of the file (volatile until Sync) and returns
// the offset it was written at. b is copied.
func (f *File) Append(b []byte) int {
	off := len(f.data)
	f.data = append(f.data, b...)
	return off
}

// Sync makes every byte written so far durable.
func (f *File) Sync() { f.synced = len(f.data) }

// Truncate cuts the file to n bytes (0 <= n <= Len(), else it panics). The
// cut is durable at once: a torn tail a recovery found and removed stays
// removed.
func (f *File) Truncate(n int) {
	if n < 0 || n > len(f.data) {
		panic(fmt.Sprintf("sim: truncate %s to %d of %d bytes", f.name, n, len(f.data)))
	}
	f.data = f.data[:n]
	f.synced = min(f.synced, n)
}

// Bytes returns every byte written, synced or not. The slice aliases the
// file: read it, do not modify or keep it past the next write.
func (f *File) Bytes() []byte { return f.data }

// Len returns the file's length in bytes, synced or not.
func (f *File) Len() int { return len(f.data) }

// Synced returns how many leading bytes are durable.
func (f *File) Synced() int { return f.synced }

// flipByte XORs one byte of the file, at a position drawn from r, with a
// non-zero mask drawn from r, and returns the note FlipByte gives; an empty
// file is left alone ("empty").
func (f *File) flipByte(r *Rand) string {
	out, note := FlipByte(f.data, r)
	f.data = out
	return note
}

// CutMode says what a crash does to the unsynced suffix of a node's files.
type CutMode int

const (
	// CutRandom keeps a uniformly random number of unsynced bytes (0 to all),
	// per file: a power loss that may tear a record.
	CutRandom CutMode = iota
	// CutKeep keeps every written byte: a process crash whose writes already
	// reached the operating system.
	CutKeep
	// CutLose drops every unsynced byte.
	CutLose
)

// String returns "random", "keep" or "lose".
func (m CutMode) String() string {
	switch m {
	case CutKeep:
		return "keep"
	case CutLose:
		return "lose"
	}
	return "random"
}

// ParseCutMode parses "random", "keep" or "lose"; other text is an error.
func ParseCutMode(s string) (CutMode, error) {
	switch s {
	case "random":
		return CutRandom, nil
	case "keep":
		return CutKeep, nil
	case "lose":
		return CutLose, nil
	}
	return 0, fmt.Errorf("sim: cut mode %q: want random, keep or lose", s)
}

package seglog

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// RunStateFileName is the clean-stop marker in FELIX_DURABLE_STORAGE_DIR
// (spec/storage-format.md §7; seeds/upgrades-and-compatibility.txt "Clean stops
// and crashes").
const RunStateFileName = "run-state"

const runStateMagic uint32 = 0x464C5352 // "FLSR"

// StorageID is the 128-bit random identity of a data directory.
type StorageID [16]byte

// RunState is the decoded run-state file.
type RunState struct {
	Found     bool      // a valid run-state file exists
	CleanStop bool      // the last run stopped cleanly (state 1)
	ID        StorageID // the storage identity recorded with it
}

// EncodeRunState returns the 25-byte file: magic FLSR, u8 state (0 running,
// 1 clean stop), 16-byte storage id, CRC-32 of the prior 21 bytes.
func EncodeRunState(clean bool, id StorageID) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 25), runStateMagic)
	state := byte(0)
	if clean {
		state = 1
	}
	b = append(b, state)
	b = append(b, id[:]...)
	return binary.BigEndian.AppendUint32(b, crcIEEE(b))
}

// DecodeRunState parses run-state bytes; ok=false for anything malformed.
func DecodeRunState(b []byte) (RunState, bool) {
	if len(b) != 25 || binary.BigEndian.Uint32(b) != runStateMagic || b[4] > 1 ||
		crcIEEE(b[:21]) != binary.BigEndian.Uint32(b[21:]) {
		return RunState{}, false
	}
	var st RunState
	st.Found, st.CleanStop = true, b[4] == 1
	copy(st.ID[:], b[5:21])
	return st, true
}

// ReadRunState reads root/run-state. A missing file gives Found=false; a
// malformed one reads as a crash with an unknown id (Found=true,
// CleanStop=false, zero ID). Errors: ErrStorageFailed for I/O failures.
func ReadRunState(fsys FS, root string) (RunState, error) {
	p := filepath.Join(root, RunStateFileName)
	f, err := fsys.OpenFile(p, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return RunState{}, nil
	}
	if err != nil {
		return RunState{}, storageErr("open", p, err)
	}
	defer f.Close()
	b := make([]byte, 26)
	n, err := readFull(f, b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return RunState{}, storageErr("read", p, err)
	}
	st, ok := DecodeRunState(b[:n])
	if !ok {
		return RunState{Found: true}, nil
	}
	return st, nil
}

// BeginRun starts a broker run on storage root: it reads the run-state, decides
// the storage identity and records "running". The identity is renewed (renewed
// = true) when the last run did not stop cleanly and mode is periodic or none;
// a first start (no file) creates one. rnd nil = crypto/rand. After opening the
// logs, a first start that repaired a torn tail must call RenewStorageID (the
// seed's rule). Errors: ErrStorageFailed.
func BeginRun(fsys FS, root string, mode FsyncMode, rnd io.Reader) (id StorageID, renewed bool, err error) {
	st, err := ReadRunState(fsys, root)
	if err != nil {
		return id, false, err
	}
	crashed := st.Found && !st.CleanStop
	keep := st.Found && st.ID != (StorageID{}) && (!crashed || mode == FsyncOnCommit)
	if keep {
		id = st.ID
	} else if id, err = newStorageID(rnd); err != nil {
		return id, false, err
	}
	renewed = st.Found && !keep
	if err := fsys.MkdirAll(root, 0o755); err != nil {
		return id, false, storageErr("mkdir", root, err)
	}
	return id, renewed, writeFileAtomic(fsys, root, RunStateFileName, EncodeRunState(false, id))
}

// RenewStorageID records a fresh identity (state running) and returns it.
func RenewStorageID(fsys FS, root string, rnd io.Reader) (StorageID, error) {
	id, err := newStorageID(rnd)
	if err != nil {
		return id, err
	}
	return id, writeFileAtomic(fsys, root, RunStateFileName, EncodeRunState(false, id))
}

// EndRun records a clean stop under id (call after every log closed cleanly).
func EndRun(fsys FS, root string, id StorageID) error {
	return writeFileAtomic(fsys, root, RunStateFileName, EncodeRunState(true, id))
}

func newStorageID(rnd io.Reader) (StorageID, error) {
	var id StorageID
	if rnd == nil {
		rnd = rand.Reader
	}
	if _, err := io.ReadFull(rnd, id[:]); err != nil {
		return id, storageErr("random", "storage-id", err)
	}
	return id, nil
}

package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// EpochsFileName is the generation-history file of a log directory
// (spec/storage-format.md §7, docs/storage-format.md "Epochs file").
const EpochsFileName = "epochs"

const epochsMagic uint32 = 0x464C5345 // "FLSE"

// Epoch is one generation-history entry: Generation began at StartOffset.
type Epoch struct {
	Generation  uint64
	StartOffset uint64
}

// EncodeEpochs returns the epochs file bytes: magic FLSE, u16 version 1,
// u32 count, count × (u64 generation, u64 start_offset), CRC-32 of all prior bytes.
func EncodeEpochs(eps []Epoch) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 14+16*len(eps)), epochsMagic)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(eps)))
	for _, e := range eps {
		b = binary.BigEndian.AppendUint64(b, e.Generation)
		b = binary.BigEndian.AppendUint64(b, e.StartOffset)
	}
	return binary.BigEndian.AppendUint32(b, crcIEEE(b))
}

// DecodeEpochs parses an epochs file. The history is derived (seeds,
// upgrades-and-compatibility.txt "Storage format"): short, wrong or
// checksum-failing bytes decode as an empty history with ok=false, never an error.
func DecodeEpochs(b []byte) (eps []Epoch, ok bool) {
	if len(b) < 14 || binary.BigEndian.Uint32(b) != epochsMagic || binary.BigEndian.Uint16(b[4:]) != 1 {
		return nil, false
	}
	n := binary.BigEndian.Uint32(b[6:])
	if uint64(len(b)-14) != uint64(n)*16 {
		return nil, false
	}
	if crcIEEE(b[:len(b)-4]) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, false
	}
	eps = make([]Epoch, n)
	for i := range eps {
		eps[i] = Epoch{Generation: binary.BigEndian.Uint64(b[10+16*i:]), StartOffset: binary.BigEndian.Uint64(b[18+16*i:])}
	}
	return eps, true
}

func (l *Log) loadEpochs() error {
	p := filepath.Join(l.dir, EpochsFileName)
	f, err := l.fs.OpenFile(p, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return storageErr("open", p, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil || size > 1<<24 {
		return nil // unreadable or absurd: read as empty
	}
	b := make([]byte, size)
	if _, err := readFull(f, b, 0); err != nil {
		return nil
	}
	l.epochs, _ = DecodeEpochs(b)
	return nil
}

// Epochs returns a copy of the log's generation history, oldest first.
func (l *Log) Epochs() []Epoch { return append([]Epoch(nil), l.epochs...) }

// AddEpoch records that generation gen begins at offset start and persists the
// history (temp file, fsync, rename, directory fsync). gen must exceed the last
// generation and start must not precede the last start (else ErrBadOptions).
// Errors: ErrStorageFailed.
func (l *Log) AddEpoch(gen, start uint64) error {
	if n := len(l.epochs); n > 0 && (gen <= l.epochs[n-1].Generation || start < l.epochs[n-1].StartOffset) {
		return fmt.Errorf("%w: epoch (%d, %d) after (%d, %d)", ErrBadOptions, gen, start, l.epochs[n-1].Generation, l.epochs[n-1].StartOffset)
	}
	eps := append(l.Epochs(), Epoch{Generation: gen, StartOffset: start})
	if err := writeFileAtomic(l.fs, l.dir, EpochsFileName, EncodeEpochs(eps)); err != nil {
		return err
	}
	l.epochs = eps
	return nil
}

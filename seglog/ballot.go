package seglog

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// BallotFileName is the ballot file of a log directory (spec/storage-format.md §7
// "ballot"): the generation this replica accepted and the leader it accepted it from.
// It lives beside the log's segments and epochs file; Reset and TruncateSuffix leave it.
const BallotFileName = "ballot"

const ballotMagic uint32 = 0x464C5342 // "FLSB"

// Ballot is what a replica accepted for its log (seeds/internal-protocol.txt
// "Replication", the fence): Generation, and Leader, the node id of the leader it
// accepted that generation from ("" for a ballot written before it knew one).
type Ballot struct {
	Generation uint64
	Leader     string
}

// EncodeBallot returns the ballot file bytes (spec/storage-format.md §7): magic FLSB,
// u16 version 1, u64 generation, u16 length + the leader's node id, CRC-32 (IEEE) of all
// prior bytes, big-endian. Errors: ErrBadOptions for a leader id longer than 65535 bytes.
func EncodeBallot(b Ballot) ([]byte, error) {
	if len(b.Leader) > math.MaxUint16 {
		return nil, fmt.Errorf("%w: ballot leader id of %d bytes", ErrBadOptions, len(b.Leader))
	}
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 20+len(b.Leader)), ballotMagic)
	out = binary.BigEndian.AppendUint16(out, 1)
	out = binary.BigEndian.AppendUint64(out, b.Generation)
	out = binary.BigEndian.AppendUint16(out, uint16(len(b.Leader)))
	out = append(out, b.Leader...)
	return binary.BigEndian.AppendUint32(out, crcIEEE(out)), nil
}

// DecodeBallot parses a ballot file. Short, wrong (magic, version, length) or
// checksum-failing bytes decode as the empty ballot with ok=false, never an error: a
// lost ballot costs a fence, never a record.
func DecodeBallot(b []byte) (ballot Ballot, ok bool) {
	if len(b) < 20 || binary.BigEndian.Uint32(b) != ballotMagic || binary.BigEndian.Uint16(b[4:]) != 1 {
		return Ballot{}, false
	}
	n := int(binary.BigEndian.Uint16(b[14:]))
	if len(b) != 20+n || crcIEEE(b[:len(b)-4]) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return Ballot{}, false
	}
	return Ballot{Generation: binary.BigEndian.Uint64(b[6:]), Leader: string(b[16 : 16+n])}, true
}

// ReadBallot reads the log's ballot file: the empty ballot when it is absent, short,
// unreadable or fails its checksum (never an error, as the epochs file).
func (l *Log) ReadBallot() Ballot {
	f, err := l.fs.OpenFile(filepath.Join(l.dir, BallotFileName), os.O_RDONLY, 0)
	if err != nil {
		return Ballot{}
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil || size < 20 || size > 20+math.MaxUint16 {
		return Ballot{}
	}
	buf := make([]byte, size)
	if _, err := readFull(f, buf, 0); err != nil {
		return Ballot{}
	}
	b, _ := DecodeBallot(buf)
	return b
}

// WriteBallot replaces the log's ballot file with b (temp file, fdatasync, rename,
// directory fsync: vfs.WriteFileAtomic), so a crash leaves the old ballot or the new one.
// Errors: EncodeBallot's; ErrStorageFailed; ErrClosed.
func (l *Log) WriteBallot(b Ballot) error {
	if l.closed {
		return ErrClosed
	}
	data, err := EncodeBallot(b)
	if err != nil {
		return err
	}
	return writeFileAtomic(l.fs, l.dir, BallotFileName, data)
}

package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// History is a loaded or built history: its operations sorted by Index.
type History struct {
	Ops []Op
}

// ErrMalformed is wrapped by a LineError whose line is not a JSON object of
// the Op shape (bad JSON, a wrong field type, trailing data).
var ErrMalformed = errors.New("malformed history line")

// ErrDuplicateIndex is wrapped by a LineError whose index an earlier line
// already used.
var ErrDuplicateIndex = errors.New("duplicate history index")

// LineError is the error of Load for one line of the input: Line is 1-based,
// Err wraps ErrMalformed, ErrInvalid or ErrDuplicateIndex (or is the read
// error of the underlying reader).
type LineError struct {
	Line int
	Err  error
}

// Error returns "history line N: cause".
func (e *LineError) Error() string { return fmt.Sprintf("history line %d: %v", e.Line, e.Err) }

// Unwrap returns the cause.
func (e *LineError) Unwrap() error { return e.Err }

// Load reads a JSON-lines history from r: one Op per line, blank lines
// skipped, any line length. Each Op is validated (Op.Validate) and indices
// must be unique; the result is sorted by Index. Errors: *LineError naming
// the first bad line; never a panic on any input.
func Load(r io.Reader) (*History, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	h := &History{}
	seen := map[int]int{} // index -> line
	for line := 1; ; line++ {
		raw, readErr := br.ReadBytes('\n')
		if readErr != nil && readErr != io.EOF {
			return nil, &LineError{Line: line, Err: readErr}
		}
		if raw = bytes.TrimSpace(raw); len(raw) > 0 {
			op, err := decodeLine(raw)
			if err != nil {
				return nil, &LineError{Line: line, Err: err}
			}
			if first, dup := seen[op.Index]; dup {
				return nil, &LineError{Line: line, Err: fmt.Errorf("%w: index %d already on line %d",
					ErrDuplicateIndex, op.Index, first)}
			}
			seen[op.Index] = line
			h.Ops = append(h.Ops, op)
		}
		if readErr == io.EOF {
			break
		}
	}
	sort.Slice(h.Ops, func(i, j int) bool { return h.Ops[i].Index < h.Ops[j].Index })
	return h, nil
}

// decodeLine decodes and validates one non-blank line.
func decodeLine(raw []byte) (Op, error) {
	var op Op
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&op); err != nil {
		return Op{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return Op{}, fmt.Errorf("%w: data after the JSON object", ErrMalformed)
	}
	if err := op.Validate(); err != nil {
		return Op{}, err
	}
	return op, nil
}

// LoadFile opens path and Loads it. Errors: those of os.Open, or Load's.
func LoadFile(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Load(f)
}

// Write writes h as JSON lines (one Op per line, in slice order), the same
// format a Recorder writes. Errors: the first marshal or write error.
func Write(w io.Writer, h *History) error {
	bw := bufio.NewWriter(w)
	for i := range h.Ops {
		line, err := json.Marshal(&h.Ops[i])
		if err != nil {
			return fmt.Errorf("history: marshal operation %d: %w", h.Ops[i].Index, err)
		}
		if _, err := bw.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ByIndex returns the position in h.Ops of the operation with the given
// Index, or -1.
func (h *History) ByIndex(index int) int {
	i := sort.Search(len(h.Ops), func(i int) bool { return h.Ops[i].Index >= index })
	if i < len(h.Ops) && h.Ops[i].Index == index {
		return i
	}
	return -1
}

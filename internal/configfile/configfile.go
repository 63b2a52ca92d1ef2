// Package configfile reads the configuration files of felix-broker (FELIX_BROKER_CONFIG)
// and felix-controlplane (FELIX_CONTROLPLANE_CONFIG), and finds the FELIX_* variables of
// an environment that look like typos of known ones (issue 23 item 11).
//
// A file is a flat YAML mapping of scalars, one "key: value" per line:
//
//	# felix-broker
//	quic_bind: 0.0.0.0:5000
//	durable_fsync_mode: periodic
//	FELIX_LOG_LEVEL: "debug"   # the variable's own name is a key too
//
// Values are plain scalars (the rest of the line after ": ", a " #" comment removed,
// blanks trimmed), "double-quoted" (Go/JSON escapes) or 'single-quoted' (” for a quote).
// This is the subset of YAML 1.2 a flat settings file needs: nesting, sequences, flow
// collections, anchors, tags, block scalars and several documents are refused with a
// *SyntaxError naming the line, never guessed at. (A YAML library would need a go.mod
// requirement this module does not have; the subset reads the same files a full parser
// would for this shape.)
package configfile

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Entry is one "key: value" line of a file.
type Entry struct {
	Key   string
	Value string
	Line  int // 1-based
}

// SyntaxError is a line of a file outside the flat subset; Line is 1-based.
type SyntaxError struct {
	Path   string
	Line   int
	Reason string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d: %s (a flat \"key: value\" mapping is expected)", e.Path, e.Line, e.Reason)
}

// ErrDuplicate wraps a key given twice in one file.
var ErrDuplicate = errors.New("configfile: key given twice")

// Read reads and parses the file at path (Parse). Errors: the os error of an unreadable
// file (wrapped, naming the path), *SyntaxError, ErrDuplicate.
func Read(path string) ([]Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("configfile: %w", err)
	}
	return Parse(path, data)
}

// Parse reads the flat mapping in data; path only names the file in errors.
func Parse(path string, data []byte) ([]Entry, error) {
	var out []Entry
	seen := map[string]int{}
	for i, raw := range strings.Split(string(data), "\n") {
		n := i + 1
		line := strings.TrimRight(raw, " \t\r")
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			continue
		case n == 1 && trimmed == "---":
			continue
		case trimmed == "---" || trimmed == "...":
			return nil, &SyntaxError{path, n, "a second YAML document"}
		case len(trimmed) != len(line):
			return nil, &SyntaxError{path, n, "an indented line (nested values are not settings)"}
		}
		e, err := parseLine(trimmed)
		if err != nil {
			return nil, &SyntaxError{path, n, err.Error()}
		}
		if first, dup := seen[e.Key]; dup {
			return nil, fmt.Errorf("%w: %s:%d: %q (first on line %d)", ErrDuplicate, path, n, e.Key, first)
		}
		seen[e.Key] = n
		e.Line = n
		out = append(out, e)
	}
	return out, nil
}

// parseLine splits "key: value" (the line is trimmed and not a comment).
func parseLine(line string) (Entry, error) {
	key, rest, ok := strings.Cut(line, ":")
	if !ok {
		return Entry{}, errors.New(`no ":" after the key`)
	}
	if key == "" || strings.ContainsAny(key, " \t\"'{}[]&*!|>%@`#,") || strings.HasPrefix(key, "-") {
		return Entry{}, fmt.Errorf("key %q is not a plain setting name", key)
	}
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return Entry{}, errors.New(`want ": " (a blank after the colon)`)
	}
	v, err := scalar(strings.TrimSpace(rest))
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %v", key, err)
	}
	return Entry{Key: key, Value: v}, nil
}

// scalar is the value of a plain, double- or single-quoted scalar with an optional
// trailing comment.
func scalar(s string) (string, error) {
	switch {
	case s == "":
		return "", nil
	case s[0] == '"':
		end := closingDouble(s)
		if end < 0 {
			return "", errors.New("unterminated double-quoted value")
		}
		if err := onlyComment(s[end+1:]); err != nil {
			return "", err
		}
		v, err := strconv.Unquote(s[:end+1])
		if err != nil {
			return "", fmt.Errorf("bad escape in %s", s[:end+1])
		}
		return v, nil
	case s[0] == '\'':
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] != '\'' {
				b.WriteByte(s[i])
				continue
			}
			if i+1 < len(s) && s[i+1] == '\'' {
				b.WriteByte('\'')
				i++
				continue
			}
			return b.String(), onlyComment(s[i+1:])
		}
		return "", errors.New("unterminated single-quoted value")
	case strings.ContainsRune("[{&*!|>%@`", rune(s[0])) || s == "-" || strings.HasPrefix(s, "- "):
		return "", fmt.Errorf("value %q is not a plain scalar (lists, maps, anchors, tags and block scalars are not settings; quote it)", s)
	}
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if i := strings.Index(s, "\t#"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if strings.Contains(s, ": ") {
		return "", fmt.Errorf("value %q holds \": \" (a nested map?); quote it", s)
	}
	return s, nil
}

// closingDouble is the index of the quote ending the double-quoted s, or -1.
func closingDouble(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// onlyComment refuses anything but blanks and a "#" comment after a quoted value.
func onlyComment(rest string) error {
	rest = strings.TrimSpace(rest)
	if rest == "" || strings.HasPrefix(rest, "#") {
		return nil
	}
	return fmt.Errorf("text %q after the quoted value", rest)
}

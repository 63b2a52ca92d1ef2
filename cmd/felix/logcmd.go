package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"felix/seglog"
)

func (a *app) logCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Inspect, verify and dump a segment log on disk (no broker needed)",
		Long: `Offline tools over one log directory (a shard's FLSG segments and FLSI indexes,
docs/storage-format.md). inspect, verify and dump only read: stop the broker first or expect
a moving tail. repair writes, and refuses while a broker holds the data dir.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(a.logInspect(), a.logVerify(), a.logDump(), a.logRepair())
	for _, sub := range cmd.Commands() {
		f := sub.Flags()
		f.String("data-dir", a.env("felix-data", "FELIX_DURABLE_STORAGE_DIR"), "with --stream: the broker's data dir")
		f.String("stream", "", "find the log of this stream (in --tenant/--namespace) under --data-dir instead of DIR")
		f.Uint32("shard", 0, "with --stream: the shard")
	}
	return cmd
}

// logDir returns the log directory: DIR, or with --stream the shard's directory under
// --data-dir (seglog.ShardDir; the newest incarnation when the stream was re-created).
func (a *app) logDir(cmd *cobra.Command, args []string) (string, error) {
	stream, _ := cmd.Flags().GetString("stream")
	switch {
	case len(args) == 1 && stream != "":
		return "", usagef("give DIR or --stream, not both")
	case len(args) == 1:
		return args[0], nil
	case stream == "":
		return "", usagef("usage: %s (or --stream NAME)", cmd.UseLine())
	}
	root, _ := cmd.Flags().GetString("data-dir")
	shard, _ := cmd.Flags().GetUint32("shard")
	base := seglog.ShardDir(root, seglog.ShardKey{Kind: seglog.ShardStream, Tenant: a.tenant, Namespace: a.namespace, Name: stream, Shard: shard})
	best, bestInc := "", int64(-1)
	if _, err := os.Stat(base); err == nil {
		best, bestInc = base, 0
	}
	matches, _ := filepath.Glob(base + "~i*")
	for _, m := range matches {
		n, err := strconv.ParseInt(strings.TrimPrefix(m, base+"~i"), 10, 64)
		if err == nil && n > bestInc {
			best, bestInc = m, n
		}
	}
	if best == "" {
		return "", withKind(ErrNotFound, fmt.Errorf("no log for stream %s/%s/%s shard %d under %s", a.tenant, a.namespace, stream, shard, root))
	}
	return best, nil
}

// segmentJSON is SegmentInfo with its error as text.
type segmentJSON struct {
	ID              uint64 `json:"id"`
	Path            string `json:"path"`
	Version         uint16 `json:"version"`
	BaseOffset      uint64 `json:"base_offset"`
	NextOffset      uint64 `json:"next_offset"`
	CreatedAtMicros int64  `json:"created_at_us"`
	FileBytes       int64  `json:"file_bytes"`
	DataBytes       int64  `json:"data_bytes"`
	Records         int64  `json:"records"`
	IndexEntries    int    `json:"index_entries"`
	Error           string `json:"error,omitempty"`
}

func (a *app) logInspect() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect DIR",
		Short: "One line per segment: offsets, sizes, index state, damage",
		Args:  nArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := a.logDir(cmd, args)
			if err != nil {
				return err
			}
			w := a.stdout
			if a.jsonOut {
				w = io.Discard
			}
			res, err := seglog.Inspect(dir, w, seglog.ToolOptions{})
			if err != nil {
				return err
			}
			if a.jsonOut {
				for _, s := range res.Segments {
					j := segmentJSON{ID: s.ID, Path: s.Path, Version: s.Version, BaseOffset: s.BaseOffset, NextOffset: s.NextOffset,
						CreatedAtMicros: s.CreatedAtMicros, FileBytes: s.FileBytes, DataBytes: s.DataBytes, Records: s.Records, IndexEntries: s.IndexEntries}
					if s.Err != nil {
						j.Error = s.Err.Error()
					}
					a.printJSON(j)
				}
			}
			return nil
		},
	}
}

func (a *app) logVerify() *cobra.Command {
	return &cobra.Command{
		Use:   "verify DIR",
		Short: "Check every header and checksum; exit 7 when damage is found",
		Args:  nArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := a.logDir(cmd, args)
			if err != nil {
				return err
			}
			w := a.stdout
			if a.jsonOut {
				w = io.Discard
			}
			res, err := seglog.Verify(dir, w, seglog.ToolOptions{})
			if err != nil && !errors.Is(err, seglog.ErrCorruption) {
				return err
			}
			if a.jsonOut {
				problems := make([]string, 0, len(res.Problems))
				for _, p := range res.Problems {
					problems = append(problems, p.Error())
				}
				a.printJSON(map[string]any{"dir": res.Dir, "segments": res.Segments, "records": res.Records, "problems": problems})
			}
			if len(res.Problems) > 0 {
				return withKind(ErrCorrupt, fmt.Errorf("%s: %d problems found", dir, len(res.Problems)))
			}
			return nil
		},
	}
}

func (a *app) logDump() *cobra.Command {
	var (
		from         uint64
		limit        int64
		payloadBytes int
	)
	cmd := &cobra.Command{
		Use:   "dump DIR",
		Short: "Print records: offset, timestamp, kind, length, payload prefix",
		Args:  nArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkNonNegative("limit", limit); err != nil {
				return err
			}
			if err := checkRange("payload-bytes", int64(payloadBytes), -1, maxInt64); err != nil {
				return err
			}
			dir, err := a.logDir(cmd, args)
			if err != nil {
				return err
			}
			opts := seglog.ToolOptions{From: from, Limit: limit, PayloadBytes: payloadBytes}
			if !a.jsonOut {
				_, err := seglog.Dump(dir, a.stdout, opts)
				return err
			}
			// Every line Dump prints is whole and quoted (no raw newline inside), so the
			// output splits on '\n' with no line-length bound (--payload-bytes may be large).
			var buf bytes.Buffer
			_, err = seglog.Dump(dir, &buf, opts)
			for _, line := range bytes.Split(buf.Bytes(), []byte{'\n'}) {
				if len(line) > 0 {
					a.printJSON(dumpLineJSON(string(line)))
				}
			}
			return err
		},
	}
	cmd.Flags().Uint64Var(&from, "from", 0, "first offset to print")
	cmd.Flags().Int64Var(&limit, "limit", 0, "most records to print (0 = all)")
	cmd.Flags().IntVar(&payloadBytes, "payload-bytes", 32, "payload bytes shown per record (-1 = none)")
	return cmd
}

// dumpLineJSON turns one seglog.Dump line ("offset O ts T kind K len L payload Q" or
// "problem: ...") into a JSON object; the payload prefix is "payload" when it is UTF-8
// text, else "payload_base64" (bytesJSON, the rule of sub --json).
func dumpLineJSON(line string) map[string]any {
	if p, ok := strings.CutPrefix(line, "problem: "); ok {
		return map[string]any{"problem": p}
	}
	var off uint64 // offsets are uint64 (seglog's record header): all 64 bits print
	var ts, kind, n int64
	var rest string
	i := strings.Index(line, " payload ")
	if i < 0 {
		return map[string]any{"line": line}
	}
	rest = line[i+len(" payload "):]
	if _, err := fmt.Sscanf(line[:i], "offset %d ts %d kind %d len %d", &off, &ts, &kind, &n); err != nil {
		return map[string]any{"line": line}
	}
	out := map[string]any{"offset": off, "ts_us": ts, "kind": kind, "len": n}
	payload, err := strconv.Unquote(rest)
	if err != nil {
		return bytesJSON(out, "payload", []byte(rest)) // not a quoted string: shown as printed
	}
	return bytesJSON(out, "payload", []byte(payload)) // payload_base64 when not UTF-8, as sub --json
}

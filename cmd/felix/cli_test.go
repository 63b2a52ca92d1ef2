package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"felix/auth"
	"felix/client"
	"felix/seglog"
)

// runCLI runs felix in-process with no environment and returns the exit code and output.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb, func(string) (string, bool) { return "", false })
	return code, out.String(), errb.String()
}

// writeLog makes a seglog log of n records ("record-<i>") in a temp dir with the
// synchronous disk (no ring) and returns the dir.
func writeLog(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	d := seglog.NewDisk(nil, nil)
	l, err := d.Open(seglog.Options{Dir: dir, FsyncMode: seglog.FsyncOnCommit, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for i := 0; i < n; i++ {
		err := l.Append([][]byte{[]byte(fmt.Sprintf("record-%d", i))}, int64(1000+i), func(_, _ uint64, err error) {
			if err != nil {
				t.Error(err)
			}
			done++
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for done < n {
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := d.Poll(10 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLogCommandsOnAWholeAndADamagedLog(t *testing.T) {
	dir := writeLog(t, 5)
	code, out, errs := runCLI(t, "", "log", "verify", dir)
	if code != ExitOK || !strings.Contains(out, "verified 5 records in 1 segments, 0 problems") {
		t.Fatalf("verify whole log: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runCLI(t, "", "log", "dump", dir, "--from", "3")
	if code != ExitOK || strings.Count(out, "\n") != 2 || !strings.Contains(out, `offset 4 ts 1004 kind 0 len 8 payload "record-4"`) {
		t.Fatalf("dump: exit %d\n%s", code, out)
	}

	// Flip one payload byte of record 2: its checksum no longer matches.
	segs, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var seg string
	for _, s := range segs {
		data, err := os.ReadFile(s)
		if err == nil && bytes.Contains(data, []byte("record-2")) {
			seg = s
		}
	}
	if seg == "" {
		t.Fatalf("no segment holds record-2 among %v", segs)
	}
	data, _ := os.ReadFile(seg)
	i := bytes.Index(data, []byte("record-2"))
	data[i+7] ^= 0xff
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "", "log", "verify", dir)
	if code != ExitCorrupt || !strings.Contains(out, "problem:") || !strings.Contains(errs, "problems found") {
		t.Fatalf("verify damaged log: exit %d, want %d\n%s%s", code, ExitCorrupt, out, errs)
	}
	code, out, _ = runCLI(t, "", "--json", "log", "verify", dir)
	if code != ExitCorrupt || !strings.Contains(out, `"problems":["seglog: `) {
		t.Fatalf("verify --json damaged log: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "--json", "log", "inspect", dir)
	if code != ExitOK || !strings.Contains(out, `"error":"seglog: `) {
		t.Fatalf("inspect --json damaged log: exit %d\n%s", code, out)
	}
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailure},
		{usagef("bad"), ExitUsage},
		{withKind(ErrNotFound, errors.New("x")), ExitNotFound},
		{fmt.Errorf("wrapped: %w", auth.ErrUnknownTenant), ExitNotFound},
		{fmt.Errorf("wrapped: %w", auth.ErrForbidden), ExitUnauthorized},
		{classify(&client.ServerError{Code: "unauthorized", Message: "forbidden"}), ExitUnauthorized},
		{classify(&client.ServerError{Code: "not_found", Message: "no such stream"}), ExitNotFound},
		{classify(&client.ServerError{Code: "overloaded", Message: "queue full"}), ExitUnavailable},
		{classify(&client.ServerError{Code: "shard_unavailable", Message: "x"}), ExitUnavailable},
		{classify(&client.ServerError{Code: "storage_failed", Message: "x"}), ExitStorageFailed},
		{classify(&client.AdminError{Status: 500, Code: "storage_failed"}), ExitStorageFailed},
		{classify(fmt.Errorf("%w: lost", client.ErrIndeterminate)), ExitIndeterminate},
		{classify(&client.CursorError{Reason: client.CursorTooOld}), ExitNotFound},
		{classify(fmt.Errorf("%w: value of 1048577 bytes", client.ErrTooLarge)), ExitUsage},
		{classify(&client.AdminError{Status: 400, Message: "bad name"}), ExitUsage},
		{classify(&client.AdminError{Status: 403}), ExitUnauthorized},
		{classify(&client.AdminError{Status: 409}), ExitFailure},
		{classify(&net.OpError{Op: "dial", Err: errors.New("refused")}), ExitUnavailable},
		{classifyPublish(context.DeadlineExceeded), ExitIndeterminate},
		{withKind(ErrCorrupt, errors.New("x")), ExitCorrupt},
		{&seglog.CorruptionError{Kind: seglog.CorruptSegmentMagic}, ExitCorrupt},
	}
	for i, c := range cases {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("case %d: exitCode(%v) = %d, want %d", i, c.err, got, c.want)
		}
	}
	// The kind wrapper keeps the cause's text and identity.
	cause := errors.New("cause")
	k := withKind(ErrUsage, cause)
	if k.Error() != "cause" || !errors.Is(k, cause) || withKind(ErrUsage, nil) != nil {
		t.Fatalf("withKind: %v", k)
	}
}

func TestUsageErrorsAndHelp(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"}, {"stream"}, {"stream", "create"}, {"cache", "get", "c"}, {"--nosuch"},
		{"sub", "s", "--from", "yesterday"}, {"sub", "s", "--count", "-1"}, {"group", "ack", "s", "g", "x"},
		{"pub", "s", "msg", "--file", "f"}, {"group", "dlq"}, {"log", "dump"}, {"token", "issue", "--subject", "x"},
	} {
		if code, out, errs := runCLI(t, "", args...); code != ExitUsage {
			t.Errorf("felix %v: exit %d, want %d\n%s%s", args, code, ExitUsage, out, errs)
		}
	}
	code, out, _ := runCLI(t, "", "--help")
	if code != ExitOK || !strings.Contains(out, "7 verification failed") || !strings.Contains(out, "FELIX_SERVER") {
		t.Fatalf("--help: exit %d\n%s", code, out)
	}
}

func TestEnvironmentDefaultsAndFlagsWin(t *testing.T) {
	env := map[string]string{"FELIX_SERVER": "10.0.0.1:7000", "FELIX_ADMIN_URL": "http://10.0.0.1:9000",
		"FELIX_AUTH_TENANT": "acme", "FELIX_NAMESPACE": "prod", "FELIX_TOKEN": "tok", "FELIX_TLS_INSECURE": "true"}
	a := newApp(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	root := a.rootCommand()
	root.SetArgs([]string{"--namespace", "dev", "help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if a.server != "10.0.0.1:7000" || a.adminURL != "http://10.0.0.1:9000" || a.tenant != "acme" || a.namespace != "dev" || !a.insecure {
		t.Fatalf("resolved %+v", a)
	}
	if tok, err := a.resolveToken(); err != nil || tok != "tok" {
		t.Fatalf("token %q %v", tok, err)
	}
	b := newApp(nil, nil, nil, nil)
	b.tokenFile = filepath.Join(t.TempDir(), "token")
	os.WriteFile(b.tokenFile, []byte("  file-token\n"), 0o600)
	if tok, err := b.resolveToken(); err != nil || tok != "file-token" {
		t.Fatalf("token file: %q %v", tok, err)
	}
	b.tokenFile = filepath.Join(t.TempDir(), "missing")
	if _, err := b.resolveToken(); exitCode(err) != ExitUsage {
		t.Fatalf("missing token file: %v", err)
	}
}

func TestSmallParsers(t *testing.T) {
	for _, c := range []struct{ in, want string }{{"localhost:5000", "y"}, {"127.0.0.2:1", "y"}, {"[::1]:5", "y"}, {"10.0.0.1:5000", ""}, {"example.com:1", ""}} {
		if got := isLoopback(c.in); got != (c.want == "y") {
			t.Errorf("isLoopback(%q) = %v", c.in, got)
		}
	}
	if s, err := parseStart("42"); err != nil || s != client.Offset(42) {
		t.Errorf("parseStart(42) = %v %v", s, err)
	}
	if s, err := parseStart("EARLIEST"); err != nil || s != client.Earliest {
		t.Errorf("parseStart(EARLIEST) = %v %v", s, err)
	}
	j := dumpLineJSON(`offset 7 ts 99 kind 1 len 3 payload "a\"b"`)
	if j["offset"] != uint64(7) || j["ts_us"] != int64(99) || j["payload"] != `a"b` {
		t.Errorf("dumpLineJSON: %v", j)
	}
	if j := dumpLineJSON("problem: bad"); j["problem"] != "bad" {
		t.Errorf("dumpLineJSON problem: %v", j)
	}
	if j := dumpLineJSON("garbage"); j["line"] != "garbage" {
		t.Errorf("dumpLineJSON garbage: %v", j)
	}
}

// FuzzDumpLineJSON: any line seglog.Dump could print (or garbage) converts without panic,
// and a well-formed record line keeps its offset. Every line becomes exactly one of the
// three objects (problem, record, line as given); a record line built from the fuzzed
// fields the way seglog.Dump prints it (seglog/tool.go) gives back every field.
func FuzzDumpLineJSON(f *testing.F) {
	f.Add(`offset 7 ts 99 kind 1 len 3 payload "a\"b"`, uint64(7), int64(99), uint8(1), uint32(3), `a"b`)
	f.Add(`problem: seglog: checksum mismatch in d segment 00000000000000000000 at byte 64`, uint64(1)<<63, int64(-1), uint8(255), uint32(1<<31), "\xff\n")
	f.Add(`offset 0 ts 0 kind 0 len 0 payload ""`, uint64(0), int64(0), uint8(0), uint32(0), "")
	f.Add(` payload `, uint64(18446744073709551615), int64(-9223372036854775808), uint8(6), uint32(32), " payload ")
	f.Fuzz(func(t *testing.T, line string, off uint64, ts int64, kind uint8, n uint32, payload string) {
		checkDumpShape(t, line, dumpLineJSON(line))
		rec := fmt.Sprintf("offset %d ts %d kind %d len %d payload %s", off, ts, kind, n, strconv.Quote(payload))
		j := dumpLineJSON(rec)
		if j["offset"] != off || j["ts_us"] != ts || j["kind"] != int64(kind) || j["len"] != int64(n) || !samePayload(j, payload) {
			t.Fatalf("record line %q became %v", rec, j)
		}
	})
}

// samePayload reports whether j shows payload the way docs/cli.md says: "payload" for
// UTF-8 text, else only "payload_base64" holding the bytes.
func samePayload(j map[string]any, payload string) bool {
	if utf8.ValidString(payload) {
		_, b64 := j["payload_base64"]
		return j["payload"] == payload && !b64
	}
	b, ok := j["payload_base64"].([]byte)
	_, text := j["payload"]
	return ok && string(b) == payload && !text
}

// checkDumpShape fails t unless j is one of dumpLineJSON's three objects for line: the
// text after "problem: ", a record (offset, ts_us, kind, len, payload), or the line itself.
func checkDumpShape(t *testing.T, line string, j map[string]any) {
	t.Helper()
	if p, ok := strings.CutPrefix(line, "problem: "); ok {
		if len(j) != 1 || j["problem"] != p {
			t.Fatalf("problem line %q became %v", line, j)
		}
		return
	}
	if len(j) == 1 && j["line"] == line {
		return
	}
	if b, ok := j["payload_base64"]; ok {
		j = maps.Clone(j)
		j["payload"] = b
		delete(j, "payload_base64")
	}
	for _, k := range []string{"offset", "ts_us", "kind", "len", "payload"} {
		if _, ok := j[k]; !ok || len(j) != 5 {
			t.Fatalf("line %q became %v: neither a record nor the line as given", line, j)
		}
	}
}

// FuzzParseStart: --from never panics; what it accepts is earliest, latest or a number.
func FuzzParseStart(f *testing.F) {
	for _, s := range []string{"earliest", "latest", "", "0", "18446744073709551615", "-1", "1e3", "LATEST"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := parseStart(s); err != nil && exitCode(err) != ExitUsage {
			t.Fatalf("parseStart(%q): %v is not a usage error", s, err)
		}
	})
}

// An explicitly empty token (--token "", FELIX_TOKEN or FELIX_AUTH_TOKEN set to "") is a
// usage error before anything is sent; it never falls back to ./felix-data/admin.token.
func TestEmptyTokenRefused(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--token", "", "stream", "list"}, "--token is empty"},
		{nil, []string{"--token=  ", "cache", "get", "c", "k"}, "--token is empty"},
		{map[string]string{"FELIX_TOKEN": ""}, []string{"stream", "list"}, "FELIX_TOKEN is set but empty"},
		{map[string]string{"FELIX_AUTH_TOKEN": ""}, []string{"cache", "get", "c", "k"}, "FELIX_AUTH_TOKEN is set but empty"},
		{map[string]string{"FELIX_TOKEN": "tok"}, []string{"--token", "", "stream", "list"}, "--token is empty"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(append([]string{"--timeout", "1s"}, c.args...), strings.NewReader(""), &out, &errb,
			func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
		if code != ExitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("env %v felix %q: exit %d, want %d with %q\n%s%s", c.env, c.args, code, ExitUsage, c.want, out.String(), errb.String())
		}
	}
	empty := newApp(nil, nil, nil, nil)
	empty.tokenFile = filepath.Join(t.TempDir(), "token")
	os.WriteFile(empty.tokenFile, []byte(" \n"), 0o600)
	if _, err := empty.resolveToken(); exitCode(err) != ExitUsage {
		t.Fatalf("empty token file: %v", err)
	}
}

// Names (stream, cache, group, key, tenant, namespace) with invalid UTF-8 are refused
// before anything is sent: the JSON wire would turn them into another name.
func TestInvalidUTF8NamesRefused(t *testing.T) {
	bad := "bad\xff"
	for _, args := range [][]string{
		{"stream", "create", bad}, {"stream", "delete", bad}, {"cache", "create", bad},
		{"cache", "put", "c", bad, "v"}, {"cache", "get", bad, "k"}, {"pub", bad, "msg"},
		{"sub", bad}, {"sub", "s", "--group", bad}, {"group", "ack", "s", bad, "1"},
		{"cache", "watch", "c", bad}, {"--namespace", bad, "stream", "list"},
	} {
		code, out, errs := runCLI(t, "", append([]string{"--token", "t", "--timeout", "1s"}, args...)...)
		if code != ExitUsage || !strings.Contains(errs, "not valid UTF-8") {
			t.Errorf("felix %q: exit %d, want %d (invalid UTF-8)\n%s%s", args, code, ExitUsage, out, errs)
		}
	}
	// A payload is bytes, not a name.
	if code, _, errs := runCLI(t, "", "--token", "t", "--timeout", "1s", "--server", "127.0.0.1:1", "pub", "s", bad); code == ExitUsage {
		t.Errorf("pub with a non-UTF-8 payload is a usage error: %s", errs)
	}
}

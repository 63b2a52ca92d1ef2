package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// runCLIEnv is runCLI with the environment env (NAME=VALUE).
func runCLIEnv(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb, func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	})
	return code, out.String(), errb.String()
}

// Values the broker would refuse or misread are usage errors (exit 2, docs/cli.md) named
// with their flag or variable and the allowed range, before anything is sent: the
// server 127.0.0.1:1 is never asked (a dial would be exit 6).
func TestBadFlagValuesRefused(t *testing.T) {
	srv := []string{"FELIX_SERVER=127.0.0.1:1", "FELIX_ADMIN_URL=http://127.0.0.1:1"}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"stream", "create", "rt", "--retention-seconds", "-5"}, "--retention-seconds -5: must not be negative"},
		{nil, []string{"stream", "create", "rt", "--retention-bytes", "-1"}, "--retention-bytes -1: must not be negative"},
		{nil, []string{"stream", "create", "rt", "--shards", "0"}, "--shards 0: want 1..4096"},
		{nil, []string{"stream", "create", "rt", "--shards", "4097"}, "--shards 4097: want 1..4096"},
		{nil, []string{"cache", "create", "c", "--shards", "0"}, "--shards 0: want 1..4096"},
		{nil, []string{"pub", "s", "m", "--key", ""}, "--key is 0 bytes: want 1..1024 bytes"},
		{nil, []string{"pub", "s", "m", "--key", strings.Repeat("k", 1025)}, "--key is 1025 bytes: want 1..1024 bytes"},
		{[]string{"FELIX_TLS_INSECURE=maybe"}, []string{"pub", "s", "m"}, `FELIX_TLS_INSECURE="maybe": want true/false`},
		{nil, []string{"sub", "s", "--idle-exit", "-1s"}, "--idle-exit -1s: must not be negative"},
		{nil, []string{"sub", "s", "--count", "-1"}, "--count -1: must not be negative"},
		{nil, []string{"sub", "s", "--shard", "4096"}, "--shard 4096: want 0..4095"},
		{nil, []string{"cache", "watch", "c", "k", "--idle-exit", "-1s"}, "--idle-exit -1s: must not be negative"},
		{nil, []string{"cache", "put", "c", "k", "v", "--ttl", "-1s"}, "--ttl -1s: must not be negative"},
		{nil, []string{"--timeout", "0s", "stream", "list"}, "--timeout 0s: want more than 0"},
		{nil, []string{"--timeout", "-1s", "stream", "list"}, "--timeout -1s: must not be negative"},
		{nil, []string{"ready", "--wait", "-1s"}, "--wait -1s: must not be negative"},
		{nil, []string{"group", "poll", "s", "g", "--wait", "-1s"}, "--wait -1s: must not be negative"},
		{nil, []string{"group", "nack", "s", "g", "1", "--after", "-1s"}, "--after -1s: must not be negative"},
		{nil, []string{"group", "ack", "s", "g", "1", "--shard", "4096"}, "--shard 4096: want 0..4095"},
		{nil, []string{"group", "poll", "s", "g", "--max", "0"}, "--max 0: want 1..10000"},
		{nil, []string{"group", "dlq", "list", "s", "g", "--limit", "-1"}, "--limit -1: must not be negative"},
		{nil, []string{"token", "issue", "--subject", "x", "--perm", "p", "--ttl", "-1h"}, "--ttl -1h0m0s: must not be negative"},
		{nil, []string{"log", "dump", "--stream", "x", "--limit", "-1"}, "--limit -1: must not be negative"},
		{nil, []string{"log", "dump", "--stream", "x", "--payload-bytes", "-2"}, "--payload-bytes -2: want -1.."},
		{nil, []string{"log", "inspect", "--stream", "x", "--shard", "5000"}, "--shard 5000: want 0..4095"},
		{nil, []string{"--server", "not a host", "pub", "s", "m"}, `--server "not a host": want host:port`},
		{nil, []string{"--server", "host:0", "cache", "get", "c", "k"}, "the port must be 1..65535"},
		{nil, []string{"--server", " :5000", "cache", "get", "c", "k"}, "with a host name or IP address"},
	} {
		code, _, errs := runCLIEnv(t, append(c.env, srv...), c.args...)
		if code != ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("felix %q (env %q): exit %d, stderr %q; want exit 2 naming %q", c.args, c.env, code, errs, c.want)
		}
	}
}

// The flag wins over a bad FELIX_TLS_INSECURE, and the broker's boolean spellings are
// accepted: the command then gets as far as dialling (unreachable: exit 6).
func TestInsecureVariableSpellings(t *testing.T) {
	for _, env := range [][]string{{"FELIX_TLS_INSECURE=maybe"}, {"FELIX_TLS_INSECURE=Yes"}, {"FELIX_TLS_INSECURE=0"}} {
		args := []string{"--server", "127.0.0.1:1", "--timeout", "300ms", "cache", "get", "c", "k"}
		if env[0] == "FELIX_TLS_INSECURE=maybe" {
			args = append([]string{"--insecure"}, args...)
		}
		if code, _, errs := runCLIEnv(t, env, args...); code != ExitUnavailable {
			t.Errorf("felix %q (env %q): exit %d, want 6\n%s", args, env, code, errs)
		}
	}
	for in, want := range map[string]bool{"1": true, "TRUE": true, " on ": true, "yes": true, "0": false, "off": false, "No": false} {
		if got, err := parseBoolValue(in); err != nil || got != want {
			t.Errorf("parseBoolValue(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseBoolValue("maybe"); err == nil {
		t.Error("parseBoolValue(maybe) accepted")
	}
}

// A line of exactly 8 MiB is a record, with "\n", "\r\n" or no line ending; one byte more
// is a usage error (exit 2) whatever follows it.
func TestScanLinesAcceptsEightMiB(t *testing.T) {
	full := strings.Repeat("a", maxLineBytes)
	for _, in := range []string{full, full + "\n", full + "\r\n", "x\n" + full + "\nyz"} {
		var lens []int
		err := scanLines(strings.NewReader(in), func(line []byte) error { lens = append(lens, len(line)); return nil })
		if err != nil || !containsLen(lens, maxLineBytes) {
			t.Errorf("input of %d bytes: lines %v, err %v; want a line of %d bytes", len(in), lens, err, maxLineBytes)
		}
	}
	for _, in := range []string{full + "a", full + "a\n", full + "ab\r\n", "x\n" + full + "aaa"} {
		err := scanLines(strings.NewReader(in), func([]byte) error { return nil })
		if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "longer than 8388608 bytes") {
			t.Errorf("input of %d bytes: err %v, want the line-length usage error", len(in), err)
		}
	}
	stop := errors.New("stop")
	if err := scanLines(strings.NewReader("a\nb\n"), func([]byte) error { return stop }); err != stop {
		t.Errorf("each's error: got %v", err)
	}
	if err := scanLines(io.MultiReader(strings.NewReader("a"), iotest{}), func([]byte) error { return nil }); !errors.Is(err, errRead) {
		t.Errorf("read error: got %v", err)
	}
}

func containsLen(lens []int, n int) bool {
	for _, l := range lens {
		if l == n {
			return true
		}
	}
	return false
}

var errRead = errors.New("read failed")

// iotest is a reader that fails.
type iotest struct{}

func (iotest) Read([]byte) (int, error) { return 0, errRead }

// log dump --json shows a payload that is not UTF-8 as payload_base64, like sub --json.
func TestDumpLineJSONBinaryPayload(t *testing.T) {
	j := dumpLineJSON(`offset 0 ts 1 kind 0 len 5 payload "bin\xff\xfe"`)
	if b, ok := j["payload_base64"].([]byte); !ok || string(b) != "bin\xff\xfe" || j["payload"] != nil {
		t.Errorf("binary payload: %v", j)
	}
	var out bytes.Buffer
	a := newApp(nil, &out, io.Discard, nil)
	a.printJSON(j)
	if !strings.Contains(out.String(), `"payload_base64":"Ymlu//4="`) {
		t.Errorf("JSON: %s", out.String())
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 shards"}, {1, "1 shard"}, {2, "2 shards"}} {
		if got := plural(c.n, "shard"); got != c.want {
			t.Errorf("plural(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

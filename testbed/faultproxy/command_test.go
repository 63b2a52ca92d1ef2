package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

var readyLine = regexp.MustCompile(`^faultproxy listen=(\S+) upstream=(\S+) control=(\S+) seed=(\d+)$`)

func TestRunCommand(t *testing.T) {
	echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunCommandContext(ctx, []string{"proxy", "--upstream", echo.LocalAddr().String(), "--seed", "99",
			"--to-server", `{"delay":"1ms"}`}, pw)
		pw.Close()
	}()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, pr)
	}()
	var m []string
	for m == nil {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("command ended before its ready line: %v", <-done)
			}
			m = readyLine.FindStringSubmatch(l)
		case <-time.After(10 * time.Second):
			t.Fatal("no ready line within 10 s")
		}
	}
	if m[4] != "99" || m[2] != echo.LocalAddr().String() {
		t.Fatalf("ready line %q", m[0])
	}
	var snap Snapshot
	if st := call(t, "GET", m[3]+"/links", "", &snap); st != 200 || snap.Seed != 99 || snap.Links[ToServer].Faults.Delay != time.Millisecond {
		t.Fatalf("control of the command: %d %+v", st, snap)
	}
	if st := call(t, "PUT", m[3]+"/links/to-client", `{"loss_pct":1}`, nil); st != 200 {
		t.Fatalf("PUT: %d", st)
	}
	sawChange := false
	for !sawChange {
		select {
		case l := <-lines:
			sawChange = strings.Contains(l, "fault change") && strings.Contains(l, `after="{\"loss_pct\":1}"`)
		case <-time.After(10 * time.Second):
			t.Fatal("the fault change was not logged to stdout")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunCommandContext: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not stop within 10 s of its context")
	}
}

func TestRunCommandUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want error
	}{
		{[]string{}, ErrUsage},
		{[]string{"--upstream", "127.0.0.1:5000", "extra"}, ErrUsage},
		{[]string{"--upstream", "127.0.0.1:5000", "--seed", "x"}, ErrUsage},
		{[]string{"--upstream", "127.0.0.1:5000", "--to-server", `{"loss_pct":-1}`}, ErrInvalidFaults},
		{[]string{"--upstream", "127.0.0.1:5000", "--to-client", `{`}, ErrUsage},
		{[]string{"--upstream", "192.0.2.1:5000"}, ErrNotLoopback},
		{[]string{"--upstream", "127.0.0.1:5000", "--control", "0.0.0.0:0"}, ErrNotLoopback},
		{[]string{"-h"}, flag.ErrHelp},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := RunCommandContext(ctx, c.args, io.Discard)
		cancel()
		if !errors.Is(err, c.want) {
			t.Errorf("RunCommand(%q) = %v, want %v", c.args, err, c.want)
		}
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The --idle-exit rule (docs/cli.md): a wait that ran out exits only when the subscription
// has been live for the whole idle since its latest (re-)subscribe; while disconnected it
// warns once and waits again (a SIGKILLed broker once turned into a silent exit 0).
func TestIdleExitCountsOnlyLiveTime(t *testing.T) {
	const idle = 40 * time.Second
	var stderr bytes.Buffer
	live, since := false, time.Time{}
	w := &idleWait{a: &app{stderr: &stderr}, idle: idle, live: func() (bool, time.Time) { return live, since }}

	if got := w.next(); got != idle {
		t.Fatalf("disconnected: wait %v, want a full %v (never exit)", got, idle)
	}
	if got := w.next(); got != idle || strings.Count(stderr.String(), "connection to the broker lost") != 1 {
		t.Fatalf("still disconnected: wait %v, stderr %q (want one warning)", got, stderr.String())
	}
	live, since = true, time.Now().Add(-10*time.Second) // resumed 10 s ago
	if got := w.next(); got <= 0 || got > idle-10*time.Second {
		t.Fatalf("resumed 10 s ago: wait %v, want the rest of %v (about 30 s)", got, idle)
	}
	if !strings.Contains(stderr.String(), "felix: resumed") {
		t.Fatalf("stderr %q: no note of the resume", stderr.String())
	}
	since = time.Now().Add(-idle - time.Second) // live and silent for longer than idle
	if got := w.next(); got != 0 {
		t.Fatalf("live and silent for over %v: wait %v, want 0 (exit)", idle, got)
	}
}

// Without --idle-exit, sub and cache watch still look at the connection every liveCheck:
// a lost broker is one "reconnecting" line on stderr, its return one "resumed", and the
// command never exits on its own (issue 23 item 10: a sub used to sit silent).
func TestSubSaysWhenItIsReconnecting(t *testing.T) {
	var stderr bytes.Buffer
	live := true
	w := &idleWait{a: &app{stderr: &stderr}, live: func() (bool, time.Time) { return live, time.Now().Add(-time.Hour) }}
	if got := w.first(); got != liveCheck {
		t.Fatalf("first wait %v, want %v", got, liveCheck)
	}
	if got := w.next(); got != liveCheck || stderr.Len() != 0 {
		t.Fatalf("live and quiet: wait %v, stderr %q (want %v, nothing)", got, stderr.String(), liveCheck)
	}
	live = false
	w.next()
	if got := w.next(); got != liveCheck || strings.Count(stderr.String(), "reconnecting") != 1 {
		t.Fatalf("disconnected: wait %v, stderr %q (want one reconnecting line)", got, stderr.String())
	}
	live = true
	if got := w.next(); got != liveCheck || strings.Count(stderr.String(), "felix: resumed") != 1 {
		t.Fatalf("back: wait %v, stderr %q", got, stderr.String())
	}
	w.seen() // a record after the resume says nothing more
	if strings.Count(stderr.String(), "felix: resumed") != 1 {
		t.Fatalf("stderr %q", stderr.String())
	}
}

package client

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"felix/proto"
)

func TestBackoffSchedule(t *testing.T) {
	b := newBackoff(10*time.Millisecond, 100*time.Millisecond)
	b.rnd = func(n int64) int64 { return n - 1 } // always the top of the window
	want := []time.Duration{10, 20, 40, 80, 100, 100}
	for i, w := range want {
		if got := b.next(); got != w*time.Millisecond {
			t.Fatalf("failure %d: wait %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	b.rnd = func(int64) int64 { return 0 } // the bottom: half the window
	if got := b.next(); got != 50*time.Millisecond {
		t.Fatalf("bottom of the capped window: %v", got)
	}
	b.reset()
	if got := b.next(); got != 5*time.Millisecond {
		t.Fatalf("after reset: %v", got)
	}
	// The real jitter stays inside [d/2, d].
	real := newBackoff(time.Millisecond, time.Second)
	for i := 0; i < 40; i++ {
		d := real.next()
		if d < 500*time.Microsecond || d > time.Second {
			t.Fatalf("jittered wait %v outside its window", d)
		}
	}
}

func TestServerErrorClassification(t *testing.T) {
	cases := []struct {
		code proto.ErrorCode
		msg  string
		want error
	}{
		{proto.CodeNotFound, "x", ErrNotFound},
		{proto.CodeUnauthorized, "forbidden", ErrUnauthorized},
		{proto.CodeOverloaded, "", ErrOverloaded},
		{proto.CodeIndeterminate, "", ErrIndeterminate},
		{proto.CodeNotLeader, "", ErrNotLeader},
		{proto.CodeLeadershipLost, "", ErrLeadershipLost},
		{proto.CodeShardUnavailable, "", ErrShardUnavailable},
		{proto.CodeMalformed, "", ErrMalformed},
		{proto.CodeStorageFailed, "", ErrStorageFailed},
		// v1 brokers send no code: classified by the text.
		{"", "auth required", ErrUnauthorized},
		{"", "forbidden", ErrUnauthorized},
		{"", "tenant mismatch", ErrUnauthorized},
		{"", "stream not found", ErrNotFound},
		{"", "missing request_id for acked publish", ErrMalformed},
	}
	for _, c := range cases {
		err := serverError(c.code, c.msg)
		// "indeterminate" is no refusal: the request may have been applied (a caller that
		// re-sent it as new on ErrRefused applied a counter add twice in e2e/clustercrash).
		if refused := c.code != proto.CodeIndeterminate; !errors.Is(err, c.want) || errors.Is(err, ErrRefused) != refused {
			t.Errorf("code %q msg %q: %v does not match %v (ErrRefused: want %v)", c.code, c.msg, err, c.want, refused)
		}
		if errors.Is(err, ErrCursor) {
			t.Errorf("code %q matched ErrCursor", c.code)
		}
	}
	if err := serverError("", "something else"); errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnauthorized) || !errors.Is(err, ErrRefused) {
		t.Errorf("unknown text classified: %v", err)
	}
	wrapped := fmt.Errorf("ctx: %w", &NotLeaderError{Address: "a"})
	var nl *NotLeaderError
	if !errors.Is(wrapped, ErrNotLeader) || !errors.As(wrapped, &nl) || nl.Address != "a" {
		t.Error("NotLeaderError through wrapping")
	}
	if err := indeterminate(errors.New("boom")); !errors.Is(err, ErrIndeterminate) {
		t.Error("indeterminate wrap")
	}
	// The binary ack text "<code>: <detail>" (spec §8.7) becomes the same typed error.
	err := replyError(reply{binary: true, ack: proto.PublishAck{Status: proto.AckStatusError}, ackText: "overloaded: queue full"})
	var se *ServerError
	if !errors.As(err, &se) || se.Code != proto.CodeOverloaded || se.Message != "queue full" {
		t.Errorf("binary ack error: %#v", err)
	}
}

func TestConfigFromEnvAndOptions(t *testing.T) {
	env := map[string]string{"FELIX_AUTH_TENANT": "t1", "FELIX_AUTH_TOKEN": "tok"}
	c := defaultConfig(func(k string) string { return env[k] })
	if c.tenant != "t1" || c.token != "tok" || c.namespace != "default" {
		t.Fatalf("env defaults: %+v", c)
	}
	if err := WithTenant("t2")(c); err != nil || c.tenant != "t2" {
		t.Fatal("WithTenant does not override the environment")
	}
	path := filepath.Join(t.TempDir(), "token")
	os.WriteFile(path, []byte("  abc\n"), 0o600)
	if err := WithTokenFile(path)(c); err != nil || c.token != "abc" {
		t.Fatalf("token file: %q %v", c.token, err)
	}
	os.WriteFile(path, []byte("\n"), 0o600)
	for _, o := range []Option{WithTokenFile(path), WithTokenFile(path + ".missing"), WithConnPool(0), WithStreamsPerConn(0),
		WithFingerprint("abc"), WithMaxAttempts(0), WithReconnectBackoff(0, time.Second), WithSubscriptionQueue(0),
		WithDialTimeout(0), WithMaxFrameBytes(1)} {
		if err := o(c); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("invalid option accepted: %v", err)
		}
	}
	if err := WithFingerprint("AA:" + fmt.Sprintf("%062x", 0))(c); err != nil || c.fingerprint != "aa"+fmt.Sprintf("%062x", 0) {
		t.Fatalf("fingerprint normalisation: %q %v", c.fingerprint, err)
	}
}

func TestPublisherOptionDefaults(t *testing.T) {
	var o PublisherOptions
	o.defaults()
	if o.Linger != time.Millisecond || o.MaxRecords != 1024 || o.MaxBytes != 256<<10 || o.MaxInflightBytes != 4<<20 || o.Ack != AckPerBatch {
		t.Fatalf("defaults %+v", o)
	}
}

// FuzzDecodeAnswer feeds arbitrary frames to the request-stream answer decoder: it must
// return a typed error or an answer, never panic.
func FuzzDecodeAnswer(f *testing.F) {
	id := uint64(7)
	for _, m := range []proto.Message{
		&proto.PublishOK{RequestID: 1, FirstOffset: &id, LastOffset: &id, Duplicate: true},
		&proto.PublishError{RequestID: 2, Message: "x", Code: proto.CodeOverloaded},
		&proto.CacheValue{Key: "k", Value: []byte{}, RequestID: &id},
		&proto.Error{Message: "forbidden", Code: proto.CodeUnauthorized},
		&proto.GroupRecords{RequestID: 3, Records: []proto.GroupRecord{{Offset: 1, Payload: []byte("p"), Delivery: 1}}},
		&proto.NotLeader{RequestID: &id, Owner: proto.Owner{NodeID: "n", Address: "a"}},
		&proto.OK{},
	} {
		frame := proto.AppendMessage(nil, m)
		f.Add(uint16(0), frame[proto.HeaderSize:])
	}
	f.Add(proto.FlagBinaryPublishAck, proto.AppendPublishAckOK(nil, 9)[proto.HeaderSize:])
	f.Add(proto.FlagBinaryPublishAck, proto.AppendPublishAckError(nil, 9, "overloaded: full")[proto.HeaderSize:])
	f.Add(proto.FlagBinaryEventBatchShared, []byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, flags uint16, body []byte) {
		var ack proto.PublishAck
		r, _, _, err := decodeAnswer(proto.Header{Flags: flags, Length: uint32(len(body))}, body, &ack)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		_ = replyError(r)
	})
}

package faultproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"testing"
	"time"

	"felix/netq"

	"github.com/quic-go/quic-go"
)

const testALPN = "faultproxy-test"

// quicEcho starts a QUIC server on 127.0.0.1:0 that echoes every bidirectional stream.
func quicEcho(t *testing.T) string {
	t.Helper()
	cert, err := netq.SelfSigned([]string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{testALPN}},
		&quic.Config{MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				for {
					s, err := c.AcceptStream(ctx)
					if err != nil {
						return
					}
					go func() { io.Copy(s, s); s.Close() }()
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func dialQUIC(addr string, handshake time.Duration) (*quic.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return quic.DialAddr(ctx, addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{testALPN}},
		&quic.Config{HandshakeIdleTimeout: handshake, MaxIdleTimeout: 10 * time.Second})
}

// echoOver writes data on a new stream of c and reads it back within timeout.
func echoOver(c *quic.Conn, data []byte, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	s.SetDeadline(time.Now().Add(timeout))
	go func() { s.Write(data); s.Close() }()
	got, err := io.ReadAll(s)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return errors.New("echo differs")
	}
	return nil
}

// isTimeout reports whether err is quic-go's handshake timeout: a *quic.HandshakeTimeoutError, or
// the *quic.IdleTimeoutError it reports when HandshakeIdleTimeout passes with no packet at all.
func isTimeout(err error) bool {
	var hto *quic.HandshakeTimeoutError
	var ito *quic.IdleTimeoutError
	return errors.As(err, &hto) || errors.As(err, &ito)
}

func TestQUICThroughProxy(t *testing.T) {
	up := quicEcho(t)
	p, err := New(Config{Upstream: up, Seed: testSeed(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := dialQUIC(p.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatalf("QUIC handshake through a clean proxy: %v", err)
	}
	defer c.CloseWithError(0, "")
	data := make([]byte, 256<<10)
	rand.Read(data)
	if err := echoOver(c, data, 10*time.Second); err != nil {
		t.Fatalf("echo through a clean proxy: %v", err)
	}
	// QUIC recovers from moderate faults on both links.
	moderate := Faults{Delay: 5 * time.Millisecond, Jitter: 2 * time.Millisecond, LossPct: 3, DuplicatePct: 2, ReorderPct: 5}
	if err := p.SetFaults(Both, moderate); err != nil {
		t.Fatal(err)
	}
	if err := echoOver(c, data, 20*time.Second); err != nil {
		t.Fatalf("echo under %v: %v", moderate, err)
	}
	ts, _ := p.Stats(ToServer)
	t.Logf("to-server under moderate faults: %+v", ts)
	if ts.DroppedLoss == 0 || ts.Duplicated == 0 {
		t.Errorf("the moderate faults were not exercised: %+v", ts)
	}

	// A partition: the open connection stalls, then recovers when the partition heals.
	p.Reset()
	if err := p.SetBlackhole(Both, true); err != nil {
		t.Fatal(err)
	}
	if err := echoOver(c, []byte("during the partition"), 300*time.Millisecond); err == nil {
		t.Fatal("an echo crossed a full blackhole")
	}
	// A new handshake under a full blackhole times out within its bounded handshake timeout.
	start := time.Now()
	_, err = dialQUIC(p.Addr().String(), 500*time.Millisecond)
	elapsed := time.Since(start)
	if !isTimeout(err) || elapsed > 5*time.Second {
		t.Fatalf("handshake under a blackhole: %v after %v, want a handshake timeout within 5 s", err, elapsed)
	}
	t.Logf("handshake under a full blackhole failed after %v: %v", elapsed, err)
	p.Reset()
	if err := echoOver(c, []byte("after the partition"), 10*time.Second); err != nil {
		t.Fatalf("the connection did not recover after Reset: %v", err)
	}
}

func TestQUICFailsUnderOneWayBlackhole(t *testing.T) {
	up := quicEcho(t)
	for _, d := range []Direction{ToServer, ToClient} {
		p, err := New(Config{Upstream: up, Seed: testSeed(t), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.SetBlackhole(d, true); err != nil {
			t.Fatal(err)
		}
		_, err = dialQUIC(p.Addr().String(), 500*time.Millisecond)
		if !isTimeout(err) {
			t.Errorf("handshake with %v blackholed: %v, want a handshake timeout", d, err)
		}
		s, _ := p.Stats(d)
		if s.DroppedBlackhole == 0 {
			t.Errorf("%v blackhole dropped nothing: %+v", d, s)
		}
		p.Close()
	}
}

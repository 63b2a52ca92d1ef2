package netq

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/internal/vfs"
	"felix/internal/vfs/vfstest"
)

func TestResetKeyCreatedOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadOrCreateResetKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ResetKeyFile)
	st, err := os.Stat(path)
	if err != nil || st.Size() != int64(ResetKeySize) || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v (size %d, mode %v)", err, st.Size(), st.Mode())
	}
	if *k1 == (quic.StatelessResetKey{}) {
		t.Fatal("key is all zeros")
	}
	k2, err := LoadOrCreateResetKey(dir)
	if err != nil || *k2 != *k1 {
		t.Fatalf("second load: %v, same=%v", err, k2 != nil && *k2 == *k1)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	other, err := LoadOrCreateResetKey(t.TempDir())
	if err != nil || *other == *k1 {
		t.Fatalf("a new data dir must get a new key (%v)", err)
	}
}

func TestResetKeyWrongSizeRefused(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 5, ResetKeySize + 1} {
		if err := os.WriteFile(filepath.Join(dir, ResetKeyFile), bytes.Repeat([]byte{1}, n), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateResetKey(dir); !errors.Is(err, ErrBadResetKey) {
			t.Fatalf("%d-byte key file: %v", n, err)
		}
	}
}

var errInjected = errors.New("injected fault")

func TestResetKeyWriteFaults(t *testing.T) {
	// The shared fault FS (vfstest.FaultFS replaced this file's faultyKeyFS): fail the
	// write, the rename or the directory fsync of the key.
	for _, op := range []vfstest.Op{vfstest.OpWrite, vfstest.OpRename, vfstest.OpSyncDir} {
		fs := &vfstest.FaultFS{}
		fs.Fail(op, errInjected)
		dir := t.TempDir()
		_, err := loadOrCreateResetKey(fs, bytes.NewReader(bytes.Repeat([]byte{7}, ResetKeySize)), dir)
		if !errors.Is(err, errInjected) {
			t.Fatalf("%s: %v", op, err)
		}
		if _, err := os.Stat(filepath.Join(dir, ResetKeyFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: temporary file left behind", op)
		}
		// Never a partial key in place: either no file, or the whole key.
		data, err := os.ReadFile(filepath.Join(dir, ResetKeyFile))
		if err == nil && len(data) != ResetKeySize {
			t.Fatalf("%s: partial key file of %d bytes", op, len(data))
		}
		// The next start succeeds.
		if _, err := LoadOrCreateResetKey(dir); err != nil {
			t.Fatalf("%s: next start: %v", op, err)
		}
	}
	if _, err := loadOrCreateResetKey(vfs.OSFS{}, bytes.NewReader(nil), t.TempDir()); !errors.Is(err, io.EOF) {
		t.Fatalf("short random source: %v", err)
	}
}

// A listener restarted on the same port with the same key resets the connections of its
// predecessor: the client learns at its next packet, long before its 30 s idle timeout.
func TestStatelessResetAfterRestart(t *testing.T) {
	dir := t.TempDir()
	key, err := LoadOrCreateResetKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, _, err := LoadCertificate("", "", testNow)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{StatelessResetKey: key, IdleTimeout: 30 * time.Second}
	l1, err := Listen("127.0.0.1:0", cert, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go echoServer(ctx, l1)
	addr := l1.Addr().String()
	c, err := quic.DialAddr(ctx, addr, PinnedClientTLS(Fingerprint(cert.Certificate[0])),
		&quic.Config{HandshakeIdleTimeout: 5 * time.Second, MaxIdleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	echo := func() error {
		s, err := c.OpenStreamSync(ctx)
		if err != nil {
			return err
		}
		if _, err := s.Write([]byte("ping")); err != nil {
			return err
		}
		s.Close()
		_, err = io.ReadAll(s)
		return err
	}
	if err := echo(); err != nil {
		t.Fatal(err)
	}

	// "Crash": the socket goes away first, so the old process sends nothing more.
	l1.udp.Close()
	l1.Close()
	key2, err := LoadOrCreateResetKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := Listen(addr, cert, Options{StatelessResetKey: key2, IdleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("restart on %s: %v", addr, err)
	}
	defer l2.Close()
	go echoServer(ctx, l2)

	start := time.Now()
	go func() { _ = echo() }() // its packets reach the new process, which answers with a stateless reset
	select {
	case <-c.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection of the previous process still open 5 s after the restart (no stateless reset)")
	}
	var reset *quic.StatelessResetError
	if cause := context.Cause(c.Context()); !errors.As(cause, &reset) {
		t.Fatalf("connection ended by %v, want a stateless reset", cause)
	}
	t.Logf("reset seen %v after the first packet to the new process", time.Since(start))
}

package client

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"felix/netq"
)

// A broker killed (SIGKILL) and restarted on the same port and data dir resets the QUIC
// connections of its predecessor (stateless-reset key kept in the data dir, netq
// LoadOrCreateResetKey): a Get sent on the SDK's old connection is answered on a new one
// within 5 s, where without the reset it would wait out QUIC's 30 s idle timeout.
func TestRestartResetsOldConnections(t *testing.T) {
	addr := freeUDPAddr(t)
	env := append(writeCert(t), "FELIX_QUIC_BIND="+addr)
	b := startBroker(t, "", env...)
	b.createCache("kv")
	c := b.dial(WithReconnectBackoff(10*time.Millisecond, 200*time.Millisecond))
	ctx := testCtx(t)
	if err := c.Put(ctx, "kv", "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(b.dataDir, netq.ResetKeyFile))
	if err != nil || len(key) != netq.ResetKeySize {
		t.Fatalf("reset key file: %d bytes, %v", len(key), err)
	}
	b.kill() // no CONNECTION_CLOSE reaches the client
	b2 := startBroker(t, b.dataDir, env...)
	if again, _ := os.ReadFile(filepath.Join(b2.dataDir, netq.ResetKeyFile)); string(again) != string(key) {
		t.Fatal("the reset key changed across the restart")
	}
	start := time.Now()
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, found, err := c.Get(gctx, "kv", "k")
	if err != nil {
		t.Fatalf("Get after the restart: %v after %v (the old connection was not reset)", err, time.Since(start))
	}
	if found && string(v) != "v" {
		t.Fatalf("Get after the restart: %q", v)
	}
	t.Logf("first Get after the restart answered in %v", time.Since(start))
}

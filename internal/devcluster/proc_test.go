package devcluster

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scriptCluster is a Cluster in a temp dir (no children yet) whose launch runs scripts.
func scriptCluster(t *testing.T, stop time.Duration) *Cluster {
	t.Helper()
	dir := t.TempDir()
	c := &Cluster{Layout: Layout{Dir: dir}, cfg: Config{StopTimeout: stop}.withDefaults(), exits: make(chan Exit, 4)}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// script writes an executable sh script and returns its path and a Node logging beside it
// (a member: its environment needs no other node of the layout).
func script(t *testing.T, c *Cluster, name, body string) (string, Node) {
	t.Helper()
	path := filepath.Join(c.Layout.Dir, name+".sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := Node{Kind: KindControlPlane, Name: name, Dir: filepath.Join(c.Layout.Dir, name)}
	n.LogPath, n.PIDPath = n.Dir+".log", n.Dir+".pid"
	return path, n
}

// TestStopKillsAChildThatIgnoresSIGTERM: Stop waits StopTimeout after SIGTERM, then
// SIGKILLs, and says so.
func TestStopKillsAChildThatIgnoresSIGTERM(t *testing.T) {
	c := scriptCluster(t, 300*time.Millisecond)
	path, n := script(t, c, "stubborn", `trap '' TERM; echo ignoring TERM; while :; do sleep 0.05; done`)
	p, err := c.launch(path, n)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(tail(n.LogPath, 5), "ignoring TERM") { // the trap is set
		if time.Now().After(deadline) {
			t.Fatalf("the script did not start: %q", tail(n.LogPath, 5))
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	err = c.Stop()
	if err == nil || !strings.Contains(err.Error(), "SIGKILL") || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("Stop = %v after %v; want the SIGKILL named, after the 300ms bound", err, time.Since(start))
	}
	if err := syscall.Kill(p.cmd.Process.Pid, 0); err == nil {
		t.Fatal("the child is still there")
	}
	if _, err := os.Stat(n.PIDPath); !os.IsNotExist(err) {
		t.Errorf("pid file left: %v", err)
	}
}

// TestExitWhileRunningIsReported: a child that exits on its own is delivered on Exits
// with its status and log tail; Stop then has nothing to stop and reports no error.
func TestExitWhileRunningIsReported(t *testing.T) {
	c := scriptCluster(t, time.Second)
	path, n := script(t, c, "quitter", `echo "bad setting FELIX_X"; exit 3`)
	if _, err := c.launch(path, n); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-c.Exits():
		if e.Node.Name != "quitter" || e.Err == nil || !strings.Contains(e.Err.Error(), "exit status 3") || !strings.Contains(e.Tail, "FELIX_X") {
			t.Fatalf("exit = %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported within 10s")
	}
	if len(c.Running()) != 0 {
		t.Errorf("running: %v", c.Running())
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop after the child exited: %v", err)
	}
}

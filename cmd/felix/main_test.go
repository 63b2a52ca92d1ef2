package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"felix/internal/testmain"
)

// The CLI tests run the felix command in-process through testscript (the test binary
// re-executes itself as "felix") against a real felix-broker built once per test run and
// started per script on 127.0.0.1 with random ports (FELIX_READY_FILE).

// binDir holds felix-broker (built by buildThenRun) and a "felix" link to the test binary.
var binDir string

type buildThenRun struct{ m *testing.M }

// Run builds felix-broker (with -race when this test binary has it), runs the tests and
// removes the build.
func (b buildThenRun) Run() int {
	if testmain.FuzzOnly() {
		return b.m.Run()
	}
	dir, err := os.MkdirTemp("", "felix-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	args := []string{"build", "-o", filepath.Join(dir, "felix-broker")}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "felix/cmd/felix-broker")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building felix-broker:", err)
		return 1
	}
	self, err := os.Executable()
	if err == nil {
		err = os.Symlink(self, filepath.Join(dir, "felix"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "linking felix:", err)
		return 1
	}
	return b.m.Run()
}

func TestMain(m *testing.M) {
	testscript.Main(buildThenRun{m}, map[string]func(){
		"felix": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv)) },
	})
}

// readyInfo is the broker's FELIX_READY_FILE (broker.ReadyInfo).
type readyInfo struct {
	QUICAddr    string `json:"quic_addr"`
	HTTPAddr    string `json:"http_addr"`
	Fingerprint string `json:"fingerprint"`
	DataDir     string `json:"data_dir"`
}

// startBroker runs felix-broker with its data in dataDir and the given extra environment,
// waits (at most 60 s) for its ready file and returns the bound addresses and a stop
// function that kills it and returns its logs.
func startBroker(dataDir, logPath string, env ...string) (readyInfo, func(), error) {
	var info readyInfo
	ready := logPath + ".ready.json"
	os.Remove(ready)
	logFile, err := os.Create(logPath)
	if err != nil {
		return info, nil, err
	}
	cmd := exec.Command(filepath.Join(binDir, "felix-broker"))
	cmd.Env = append(os.Environ(), "FELIX_QUIC_BIND=127.0.0.1:0", "FELIX_BROKER_METRICS_BIND=127.0.0.1:0",
		"FELIX_DURABLE_STORAGE_DIR="+dataDir, "FELIX_READY_FILE="+ready, "FELIX_CORE_SHARDS=2")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return info, nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Kill()
			<-exited
			logFile.Close()
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, err := os.ReadFile(ready)
		if err == nil && json.Unmarshal(data, &info) == nil && info.QUICAddr != "" {
			return info, stop, nil
		}
		select {
		case <-exited:
			stop()
			logs, _ := os.ReadFile(logPath)
			return info, nil, fmt.Errorf("broker exited before ready:\n%s", logs)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			logs, _ := os.ReadFile(logPath)
			return info, nil, fmt.Errorf("broker not ready after 60 s:\n%s", logs)
		}
	}
}

// TestScripts runs testdata/script/*.txtar. Each script gets a fresh broker whose data
// dir is $WORK/felix-data (so the CLI's default token file ./felix-data/admin.token is
// the broker's admin token), and the environment FELIX_SERVER, FELIX_ADMIN_URL,
// FELIX_TLS_FINGERPRINT, ADMIN_ADDR (the admin API's host:port), DATA (the data dir) and
// BROKER_LOG.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			dataDir := filepath.Join(env.WorkDir, "felix-data")
			logPath := filepath.Join(env.WorkDir, "..", filepath.Base(env.WorkDir)+"-broker.log")
			info, stop, err := startBroker(dataDir, logPath)
			if err != nil {
				return err
			}
			env.Defer(stop)
			env.Setenv("FELIX_SERVER", info.QUICAddr)
			env.Setenv("FELIX_ADMIN_URL", "http://"+info.HTTPAddr)
			env.Setenv("FELIX_TLS_FINGERPRINT", info.Fingerprint)
			env.Setenv("ADMIN_ADDR", info.HTTPAddr)
			env.Setenv("DATA", dataDir)
			env.Setenv("BROKER_LOG", logPath)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile": cmdWaitFile,
			"exitcode": cmdExitCode,
			"startbg":  cmdStartBg,
			"waitbg":   cmdWaitBg,
		},
	})
}

// cmdWaitFile is "waitfile FILE TEXT": wait (at most 30 s) until FILE contains TEXT,
// for output of a background felix command.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitfile FILE TEXT")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(ts.MkAbs(args[0]))
		if strings.Contains(string(data), args[1]) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s does not contain %q after 30 s; it holds:\n%s", args[0], args[1], data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdExitCode is "exitcode N PROG ARGS...": run PROG like exec and require exit code N
// (stdout and stderr are then checked as after exec).
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %v", err)
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exitcode: %v", err)
	}
	if got != want {
		ts.Logf("stdout:\n%s\nstderr:\n%s", ts.ReadFile("stdout"), ts.ReadFile("stderr"))
		ts.Fatalf("%s exited with %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

// bgProcs are the processes started by startbg, by script and name.
var bgProcs sync.Map // map[*testscript.TestScript]map[string]*bgProc

type bgProc struct {
	cmd  *exec.Cmd
	done chan error
}

// cmdStartBg is "startbg NAME FILE felix ARGS...": start felix in the background with
// stdout and stderr appended to FILE (which waitfile can watch while it runs, unlike
// testscript's own background exec), in the script's directory and FELIX_* environment.
// The process is killed when the script ends; waitbg waits for it.
func cmdStartBg(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 || args[2] != "felix" {
		ts.Fatalf("usage: startbg NAME FILE felix [ARGS...]")
	}
	out, err := os.Create(ts.MkAbs(args[1]))
	ts.Check(err)
	cmd := exec.Command(filepath.Join(binDir, "felix"), args[3:]...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = os.Environ()
	for _, k := range []string{"FELIX_SERVER", "FELIX_ADMIN_URL", "FELIX_TLS_FINGERPRINT"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	cmd.Stdout, cmd.Stderr = out, out
	ts.Check(cmd.Start())
	p := &bgProc{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); out.Close() }()
	m, _ := bgProcs.LoadOrStore(ts, &sync.Map{})
	m.(*sync.Map).Store(args[0], p)
	ts.Defer(func() {
		cmd.Process.Kill()
	})
}

// cmdWaitBg is "waitbg NAME [N]": wait (at most 30 s) for a startbg process; it must exit
// with code N (default 0).
func cmdWaitBg(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitbg NAME [EXITCODE]")
	}
	want := 0
	if len(args) == 2 {
		n, err := strconv.Atoi(args[1])
		ts.Check(err)
		want = n
	}
	m, ok := bgProcs.Load(ts)
	var v any
	if ok {
		v, ok = m.(*sync.Map).Load(args[0])
	}
	if !ok {
		ts.Fatalf("waitbg: no background process %q", args[0])
	}
	p := v.(*bgProc)
	select {
	case err := <-p.done:
		got := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			got = ee.ExitCode()
		case err != nil:
			ts.Fatalf("background %s: %v", args[0], err)
		}
		if got != want {
			ts.Fatalf("background %s exited with %d, want %d", args[0], got, want)
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		ts.Fatalf("background %s still running after 30 s", args[0])
	}
}

// Command helper is the supervisor tests' stand-in for a node: it prints its arguments and
// chosen variables, optionally allocates memory, writes a ready file and/or serves /ready,
// prints a tick line at an interval, and handles SIGTERM by draining for a set time (or
// ignoring it).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type options struct {
	ready, httpAddr, printEnv string
	readyDelay, drain, tick   time.Duration
	ignoreTerm                bool
	allocMiB, exitCode        int
	exitAfter                 time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.ready, "ready", "", "write {\"pid\":N} to this file when ready")
	flag.StringVar(&o.httpAddr, "http", "", "serve GET /ready (200 once ready) on this address")
	flag.StringVar(&o.printEnv, "print-env", "", "comma-separated variables to print as env NAME=VALUE")
	flag.DurationVar(&o.readyDelay, "ready-delay", 0, "work before becoming ready")
	flag.DurationVar(&o.drain, "drain", 0, "on SIGTERM, drain this long, then exit 0")
	flag.DurationVar(&o.tick, "tick", 0, "print a tick line at this interval")
	flag.BoolVar(&o.ignoreTerm, "ignore-term", false, "print and ignore SIGTERM")
	flag.IntVar(&o.allocMiB, "alloc-mib", 0, "allocate and touch this many MiB")
	flag.IntVar(&o.exitCode, "exit-code", 0, "with -exit-after: the exit code")
	flag.DurationVar(&o.exitAfter, "exit-after", 0, "exit on its own after this long")
	flag.Parse()
	fmt.Printf("args %s\n", strings.Join(flag.Args(), " "))
	for _, name := range strings.Split(o.printEnv, ",") {
		if name != "" {
			v, ok := os.LookupEnv(name)
			fmt.Printf("env %s=%s set=%v\n", name, v, ok)
		}
	}
	os.Exit(run(o))
}

var ballast []byte

func run(o options) int {
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	if o.allocMiB > 0 {
		ballast = make([]byte, o.allocMiB<<20)
		for i := range ballast {
			ballast[i] = byte(i)
		}
		fmt.Printf("allocated %d MiB\n", o.allocMiB)
	}
	time.Sleep(o.readyDelay) // simulated start-up work, not synchronization
	if err := becomeReady(o); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	fmt.Println("ready")
	var tick <-chan time.Time
	if o.tick > 0 {
		tick = time.NewTicker(o.tick).C
	}
	var exit <-chan time.Time
	if o.exitAfter > 0 {
		exit = time.After(o.exitAfter)
	}
	for n := 0; ; n++ {
		select {
		case <-tick:
			fmt.Printf("tick %d\n", n)
		case <-exit:
			fmt.Printf("exiting with %d\n", o.exitCode)
			return o.exitCode
		case <-terms:
			if o.ignoreTerm {
				fmt.Println("ignoring SIGTERM")
				continue
			}
			fmt.Println("draining")
			time.Sleep(o.drain) // simulated drain work
			fmt.Println("drained")
			return 0
		}
	}
}

// becomeReady starts the HTTP server and writes the ready file (temp + rename).
func becomeReady(o options) error {
	if o.httpAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ready") })
		go http.ListenAndServe(o.httpAddr, mux)
	}
	if o.ready == "" {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"pid": os.Getpid(), "args": flag.Args()})
	tmp := filepath.Join(filepath.Dir(o.ready), ".ready.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, o.ready)
}

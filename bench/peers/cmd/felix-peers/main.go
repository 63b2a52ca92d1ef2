// Command felix-peers runs the peers Felix is compared with, on loopback, for felix-bench
// (issue 10, "Peers"): an embedded NATS server with JetStream on file storage, and the
// client sides of the JetStream, core NATS and Redis workloads. Each client subcommand
// prints one JSON line in felix-bench's Result shape. It lives in its own Go module so the
// broker's go.mod stays free of the peers' dependencies.
//
//	felix-peers nats-server --store DIR --sync always|default --ready FILE
//	felix-peers js-publish  --url URL --publishers 8 --size 1024 --sync always
//	felix-peers js-async    --url URL --size 1024
//	felix-peers nats-pubsub --url URL --size 1024 --fanout 1
//	felix-peers redis       --addr 127.0.0.1:6379 --clients 50 --inflight 1 --size 256
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

// common holds the flags every client subcommand takes.
type common struct {
	warmup, duration, drain time.Duration
	size                    int
	name                    string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.DurationVar(&c.warmup, "warmup", time.Second, "warm-up, excluded from the figures")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "measured phase")
	fs.DurationVar(&c.drain, "drain", 20*time.Second, "how long deliveries may trail the last send")
	fs.IntVar(&c.size, "size", 1024, "payload bytes")
	fs.StringVar(&c.name, "shape", "", "shape name to report")
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: felix-peers nats-server|js-publish|js-async|nats-pubsub|redis [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "nats-server":
		err = natsServer(os.Args[2:])
	case "js-publish":
		err = jsPublish(os.Args[2:])
	case "js-async":
		err = jsAsync(os.Args[2:])
	case "nats-pubsub":
		err = natsPubSub(os.Args[2:])
	case "redis":
		err = redisBench(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "felix-peers:", err)
		os.Exit(1)
	}
}

package broker

import (
	"errors"
	"felix/clock"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
)

// ErrConfig wraps every invalid configuration value; the message names the variable (or
// flag) and the value. Test with errors.Is.
var ErrConfig = errors.New("broker: invalid configuration")

// ErrHelp is returned by LoadConfig for -h / --help; print Usage and exit 0.
var ErrHelp = errors.New("help requested")

// Usage writes the flag and variable list.
func Usage(w io.Writer) {
	fmt.Fprintln(w, "usage: felix-broker [--print-config] [--flag value ...]")
	fmt.Fprintln(w, "Every flag has a FELIX_* variable; flags win over variables, variables over defaults.")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range settings() {
		fmt.Fprintf(tw, "  --%s\t%s\t%s (default %q)\n", s.flag, s.env, s.help, s.def)
	}
	tw.Flush()
}

// Source says where a setting's effective value came from (shown by --print-config).
type Source string

// Sources in load order; a later one wins (spec/config.md load order, flags last;
// SourceFile, config_file.go, comes between the default and env).
const (
	SourceDefault Source = "default"
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag"
)

// FsyncMode is FELIX_DURABLE_FSYNC_MODE (spec/config.md §2).
type FsyncMode string

// Fsync modes. A single node defaults to on_commit (group-committed): without replicas
// nothing else covers a crash. Clusters keep the seed's periodic default.
const (
	FsyncNone     FsyncMode = "none"
	FsyncPeriodic FsyncMode = "periodic"
	FsyncOnCommit FsyncMode = "on_commit"
)

// Config is the broker's effective configuration: built-in defaults, then FELIX_* env,
// then command-line flags (spec/config.md §1, §2, §4; names and defaults there). Sizes are
// bytes, durations carry their unit in the field name. Load with LoadConfig.
type Config struct {
	// Clock is the broker's and its engine's time (felix/clock; nil = clock.Real()). Not a
	// setting: felix-broker sets it from the test clock hook (clock.FromEnv).
	Clock clock.Clock

	// Broker core (spec/config.md §1).
	QUICBind                string // FELIX_QUIC_BIND, UDP host:port
	MetricsBind             string // FELIX_BROKER_METRICS_BIND, HTTP host:port (ops + admin API)
	MaxFrameBytes           uint32 // FELIX_MAX_FRAME_BYTES; 0 ⇒ 16 MiB
	AckOnCommit             bool   // FELIX_ACK_ON_COMMIT
	PublishInflightBytes    int64  // FELIX_BROKER_PUBLISH_INFLIGHT_BYTES, process-wide
	PublishConnInflightByte int64  // FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES, per connection
	SubscriberQueueCapacity int    // FELIX_SUBSCRIBER_QUEUE_CAPACITY, frames per subscription
	MaxSubscriptionsPerConn int    // FELIX_MAX_SUBSCRIPTIONS_PER_CONN
	ShutdownDrainTimeoutMS  int    // FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS
	AuthTimeoutMS           int    // FELIX_AUTH_TIMEOUT_MS: a connection without a successful auth by then is closed (0x103)
	CoreShards              int    // FELIX_CORE_SHARDS: engine cores (0 = Cores, else one per CPU); see EngineCores
	// Engine settings, passed to core.Config (core and ring read no environment).
	Cores             string // FELIX_CORES: "" or 1..1024, the deprecated alias of FELIX_CORE_SHARDS (used when that is 0)
	IOBackend         string // FELIX_IO_BACKEND: "", auto, uring or syscall (core.Config.IOBackend)
	ControlplaneURL   string // FELIX_CONTROLPLANE_URL (config_cluster.go: cluster mode)
	ServiceInstanceID string // FELIX_SERVICE_INSTANCE_ID
	LogFormat         string // FELIX_LOG_FORMAT: text or json
	LogLevel          string // FELIX_LOG_LEVEL: debug, info, warn, error (PROPOSED)

	// Durability (spec/config.md §2).
	DataDir                  string    // FELIX_DURABLE_STORAGE_DIR
	FsyncMode                FsyncMode // FELIX_DURABLE_FSYNC_MODE
	FsyncIntervalMS          int       // FELIX_DURABLE_FSYNC_INTERVAL_MS
	SegmentBytes             int64     // FELIX_DURABLE_SEGMENT_BYTES (preallocated per shard log)
	RetentionBytes           int64     // FELIX_DURABLE_RETENTION_BYTES, 0 = off
	RetentionSeconds         int64     // FELIX_DURABLE_RETENTION_SECONDS, 0 = off
	RetentionIntervalSeconds int64     // FELIX_DURABLE_RETENTION_INTERVAL_SECONDS
	MaxShards                int       // FELIX_MAX_SHARDS (PROPOSED): stream + cache shards on this node

	// Transport (spec/config.md §4, mapped to quic-go; PROPOSED limits).
	TLSCertFile          string // FELIX_TLS_CERT (PEM); unset with FELIX_TLS_KEY ⇒ self-signed
	TLSKeyFile           string // FELIX_TLS_KEY (PEM)
	UDPSendBufferBytes   int    // FELIX_UDP_SEND_BUFFER
	UDPRecvBufferBytes   int    // FELIX_UDP_RECV_BUFFER
	InitialMTU           int    // FELIX_INITIAL_MTU: quic-go InitialPacketSize, 0 or 1200..65527
	MaxConnections       int    // FELIX_MAX_CONNECTIONS (PROPOSED)
	MaxStreamsPerConn    int    // FELIX_MAX_STREAMS_PER_CONN (PROPOSED), bi and uni each
	StreamRecvWindow     int64  // FELIX_CACHE_STREAM_RECV_WINDOW: quic-go max stream window
	ConnRecvWindow       int64  // FELIX_CACHE_CONN_RECV_WINDOW: quic-go max connection window
	StreamWriterMaxBytes int    // FELIX_STREAM_WRITER_MAX_BYTES (PROPOSED): queued answers per stream

	// Operations (PROPOSED, docs/operations.md).
	Auth       bool   // FELIX_AUTH: on (default) or off
	AutoCreate bool   // FELIX_AUTO_CREATE: create unknown streams/caches on first use
	ReadyFile  string // FELIX_READY_FILE: JSON with bound addresses, written once ready
	// Pprof serves /debug/pprof/ on the HTTP listener (FELIX_PPROF, off by default; with
	// auth on it needs an admin token: tenant.manage on tenant:default). Issue 23 item 7.
	Pprof bool

	// Broker-internal transport (config_cluster.go).
	ClusterConfig

	sources map[string]Source
}

// setting binds one variable to a Config field.
type setting struct {
	env  string
	flag string
	def  string
	help string
	set  func(c *Config, v string) error
	get  func(c *Config) string
}

func str(field func(*Config) *string) (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error { *field(c) = v; return nil },
		func(c *Config) string { return *field(c) }
}

func addr(field func(*Config) *string) (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error {
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				return fmt.Errorf("want host:port: %v", err)
			}
			if _, err := net.LookupPort("udp", port); err != nil || port == "" {
				return fmt.Errorf("port %q: want 0..65535", port)
			}
			*field(c) = v
			return nil
		},
		func(c *Config) string { return *field(c) }
}

func integer[T ~int | ~int64 | ~uint32](field func(*Config) *T, lo, hi int64) (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return fmt.Errorf("want an integer")
			}
			if n < lo || n > hi {
				return fmt.Errorf("want %d..%d", lo, hi)
			}
			*field(c) = T(n)
			return nil
		},
		func(c *Config) string { return strconv.FormatInt(int64(*field(c)), 10) }
}

func boolean(field func(*Config) *bool) (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error {
			b, err := parseBool(v)
			if err != nil {
				return err
			}
			*field(c) = b
			return nil
		},
		func(c *Config) string { return strconv.FormatBool(*field(c)) }
}

// parseBool accepts 1/true/yes/on and 0/false/no/off, any case (spec/config.md preamble).
func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("want true/false (1/0, yes/no, on/off)")
}

const maxInt = int64(^uint(0) >> 1)

// settings is the table behind LoadConfig, --print-config and docs/operations.md. Flag
// names are the yaml keys of spec/config.md with '-' for '_' (or the variable's name
// without FELIX_ where the spec has no yaml key).
func settings() []setting {
	var s []setting
	add := func(env, flagName, def, help string, set func(*Config, string) error, get func(*Config) string) {
		s = append(s, setting{env: env, flag: flagName, def: def, help: help, set: set, get: get})
	}
	a, b := addr(func(c *Config) *string { return &c.QUICBind })
	add("FELIX_QUIC_BIND", "quic-bind", "0.0.0.0:5000", "client QUIC listener (UDP host:port; port 0 picks one)", a, b)
	a, b = addr(func(c *Config) *string { return &c.MetricsBind })
	add("FELIX_BROKER_METRICS_BIND", "metrics-bind", "0.0.0.0:8080", "HTTP: /live /ready /metrics /replication/halted (no token: keep it off untrusted networks), the admin API /v1/... and, with FELIX_PPROF, /debug/pprof", a, b)
	a, b = integer(func(c *Config) *uint32 { return &c.MaxFrameBytes }, 0, 1<<30)
	add("FELIX_MAX_FRAME_BYTES", "max-frame-bytes", "16777216", "max frame payload bytes (0 = 16 MiB)", a, b)
	a, b = boolean(func(c *Config) *bool { return &c.AckOnCommit })
	add("FELIX_ACK_ON_COMMIT", "ack-on-commit", "false", "ack publishes after commit instead of on enqueue", a, b)
	a, b = integer(func(c *Config) *int64 { return &c.PublishInflightBytes }, 1<<16, maxInt)
	add("FELIX_BROKER_PUBLISH_INFLIGHT_BYTES", "pub-inflight-bytes", "67108864", "process-wide in-flight publish bytes", a, b)
	a, b = integer(func(c *Config) *int64 { return &c.PublishConnInflightByte }, 1<<16, maxInt)
	add("FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES", "pub-conn-inflight-bytes", "16777216", "in-flight publish bytes per connection (readers pause past it)", a, b)
	a, b = integer(func(c *Config) *int { return &c.SubscriberQueueCapacity }, 1, 1<<20)
	add("FELIX_SUBSCRIBER_QUEUE_CAPACITY", "subscriber-queue-capacity", "512", "per-subscription queue (frames); drop_new past it", a, b)
	a, b = integer(func(c *Config) *int { return &c.MaxSubscriptionsPerConn }, 1, 1<<20)
	add("FELIX_MAX_SUBSCRIPTIONS_PER_CONN", "max-subscriptions-per-conn", "4096", "subscriptions per connection", a, b)
	a, b = integer(func(c *Config) *int { return &c.ShutdownDrainTimeoutMS }, 1, 3600_000)
	add("FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS", "shutdown-drain-timeout-ms", "25000", "SIGTERM/SIGINT drain budget (ms)", a, b)
	a, b = integer(func(c *Config) *int { return &c.AuthTimeoutMS }, 1, 3600_000)
	add("FELIX_AUTH_TIMEOUT_MS", "auth-timeout-ms", "10000", "close a connection (QUIC error 0x103) when no stream of it authenticated within this (ms)", a, b)
	a, b = integer(func(c *Config) *int { return &c.CoreShards }, 0, 1024)
	add("FELIX_CORE_SHARDS", "core-shards", "0", "engine cores (0 = FELIX_CORES, else one per CPU)", a, b)
	// FELIX_CORES is the deprecated alias of FELIX_CORE_SHARDS (the engine once read it itself).
	a, b = optionalInt(func(c *Config) *string { return &c.Cores }, 1, 1024)
	add("FELIX_CORES", "cores", "", "deprecated alias of FELIX_CORE_SHARDS, used when that is 0 (empty = one per CPU)", a, b)
	a, b = oneOf(func(c *Config) *string { return &c.IOBackend }, "", "auto", "uring", "syscall")
	add("FELIX_IO_BACKEND", "io-backend", "", "disk I/O backend: auto (empty; io_uring, else syscalls), uring or syscall", a, b)
	a, b = str(func(c *Config) *string { return &c.ServiceInstanceID })
	add("FELIX_SERVICE_INSTANCE_ID", "service-instance-id", "", "instance id in logs ($HOSTNAME when empty)", a, b)
	a, b = oneOf(func(c *Config) *string { return &c.LogFormat }, "text", "json")
	add("FELIX_LOG_FORMAT", "log-format", "text", "text or json (log/slog)", a, b)
	a, b = oneOf(func(c *Config) *string { return &c.LogLevel }, "debug", "info", "warn", "error")
	add("FELIX_LOG_LEVEL", "log-level", "info", "debug, info, warn or error", a, b)

	a, b = str(func(c *Config) *string { return &c.DataDir })
	add("FELIX_DURABLE_STORAGE_DIR", "durable-storage-dir", "./felix-data", "data directory (catalog, auth keys, logs, run-state)", a, b)
	a, b = fsyncMode()
	add("FELIX_DURABLE_FSYNC_MODE", "durable-fsync-mode", "on_commit", "none (off), periodic, on_commit (on-commit, commit)", a, b)
	a, b = integer(func(c *Config) *int { return &c.FsyncIntervalMS }, 1, 3600_000)
	add("FELIX_DURABLE_FSYNC_INTERVAL_MS", "durable-fsync-interval-ms", "250", "periodic fsync interval (ms)", a, b)
	a, b = integer(func(c *Config) *int64 { return &c.SegmentBytes }, 4096, 1<<40)
	add("FELIX_DURABLE_SEGMENT_BYTES", "durable-segment-bytes", "268435456", "segment rollover size (a log reserves disk 8 MiB at a time ahead of its data, not a whole segment)", a, b)
	a, b = integer(func(c *Config) *int64 { return &c.RetentionBytes }, 0, maxInt)
	add("FELIX_DURABLE_RETENTION_BYTES", "durable-retention-bytes", "0", "drop the oldest sealed segments of a shard above this size (0 = off)", a, b)
	a, b = integer(func(c *Config) *int64 { return &c.RetentionSeconds }, 0, maxInt/1e9)
	add("FELIX_DURABLE_RETENTION_SECONDS", "durable-retention-seconds", "0", "drop sealed segments whose newest record is older (0 = off)", a, b)
	a, b = integer(func(c *Config) *int64 { return &c.RetentionIntervalSeconds }, 1, 86400)
	add("FELIX_DURABLE_RETENTION_INTERVAL_SECONDS", "durable-retention-interval-seconds", "60", "retention check interval", a, b)
	a, b = integer(func(c *Config) *int { return &c.MaxShards }, 1, 1<<20)
	add("FELIX_MAX_SHARDS", "max-shards", "1024", "stream and cache shards this node may hold (admin API and auto-create refuse more)", a, b)

	a, b = str(func(c *Config) *string { return &c.TLSCertFile })
	add("FELIX_TLS_CERT", "tls-cert", "", "client-role certificate (PEM); unset with FELIX_TLS_KEY = self-signed", a, b)
	a, b = str(func(c *Config) *string { return &c.TLSKeyFile })
	add("FELIX_TLS_KEY", "tls-key", "", "client-role private key (PEM)", a, b)
	a, b = integer(func(c *Config) *int { return &c.UDPSendBufferBytes }, 0, 1<<30)
	add("FELIX_UDP_SEND_BUFFER", "udp-send-buffer", "8388608", "SO_SNDBUF request", a, b)
	a, b = integer(func(c *Config) *int { return &c.UDPRecvBufferBytes }, 0, 1<<30)
	add("FELIX_UDP_RECV_BUFFER", "udp-recv-buffer", "8388608", "SO_RCVBUF request", a, b)
	a, b = integer(func(c *Config) *int { return &c.InitialMTU }, 0, 65527)
	add("FELIX_INITIAL_MTU", "initial-mtu", "0", "starting QUIC packet size, 1200..65527 (0 = quic-go's 1280 with a 1200 fallback; PMTU discovery raises it)", a, b)
	a, b = integer(func(c *Config) *int { return &c.MaxConnections }, 1, 1<<20)
	add("FELIX_MAX_CONNECTIONS", "max-connections", "1024", "concurrent client connections", a, b)
	a, b = integer(func(c *Config) *int { return &c.MaxStreamsPerConn }, 1, 1<<20)
	add("FELIX_MAX_STREAMS_PER_CONN", "max-streams-per-conn", "256", "concurrent client-opened streams per connection (bi and uni each)", a, b)
	a, b = integer(func(c *Config) *int64 { return &c.StreamRecvWindow }, 1<<16, 1<<32)
	add("FELIX_CACHE_STREAM_RECV_WINDOW", "cache-stream-recv-window", "16777216", "QUIC stream receive window ceiling", a, b)
	a, b = integer(func(c *Config) *int64 { return &c.ConnRecvWindow }, 1<<16, 1<<34)
	add("FELIX_CACHE_CONN_RECV_WINDOW", "cache-conn-recv-window", "67108864", "QUIC connection receive window ceiling", a, b)
	a, b = integer(func(c *Config) *int { return &c.StreamWriterMaxBytes }, 1<<12, 1<<30)
	add("FELIX_STREAM_WRITER_MAX_BYTES", "stream-writer-max-bytes", "4194304", "queued answer bytes per stream before the stream is reset", a, b)

	a, b = authMode()
	add("FELIX_AUTH", "auth", "on", "on, or off (development only; logged as a warning)", a, b)
	a, b = boolean(func(c *Config) *bool { return &c.AutoCreate })
	add("FELIX_AUTO_CREATE", "auto-create", "false", "create unknown streams/caches on first use (development)", a, b)
	a, b = str(func(c *Config) *string { return &c.ReadyFile })
	add("FELIX_READY_FILE", "ready-file", "", "write bound addresses as JSON here once ready", a, b)
	a, b = boolean(func(c *Config) *bool { return &c.Pprof })
	add("FELIX_PPROF", "pprof", "false", "serve /debug/pprof/ on the HTTP listener (with auth on: admin token only)", a, b)
	return append(s, clusterSettings()...)
}

// optionalInt accepts "" (unset) or an integer in lo..hi, kept as text.
func optionalInt(field func(*Config) *string, lo, hi int64) (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if v != "" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < lo || n > hi {
					return fmt.Errorf("want empty or an integer %d..%d", lo, hi)
				}
			}
			*field(c) = v
			return nil
		},
		func(c *Config) string { return *field(c) }
}

// EngineCores is the engine's core count (core.Config.Cores): FELIX_CORE_SHARDS when it is
// not 0, else the deprecated alias FELIX_CORES when set, else 0 (one core per CPU).
func (c *Config) EngineCores() int {
	if c.CoreShards != 0 || c.Cores == "" {
		return c.CoreShards
	}
	n, _ := strconv.Atoi(c.Cores) // validated by LoadConfig
	return n
}

func oneOf(field func(*Config) *string, allowed ...string) (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error {
			v = strings.ToLower(strings.TrimSpace(v))
			for _, x := range allowed {
				if v == x {
					*field(c) = v
					return nil
				}
			}
			return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
		},
		func(c *Config) string { return *field(c) }
}

func fsyncMode() (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "none", "off":
				c.FsyncMode = FsyncNone
			case "periodic":
				c.FsyncMode = FsyncPeriodic
			case "on_commit", "on-commit", "commit":
				c.FsyncMode = FsyncOnCommit
			default:
				return fmt.Errorf("want none, periodic or on_commit")
			}
			return nil
		},
		func(c *Config) string { return string(c.FsyncMode) }
}

func authMode() (func(*Config, string) error, func(*Config) string) {
	return func(c *Config, v string) error {
			b, err := parseBool(v)
			if err != nil {
				return fmt.Errorf("want on or off")
			}
			c.Auth = b
			return nil
		},
		func(c *Config) string {
			if c.Auth {
				return "on"
			}
			return "off"
		}
}

// LoadConfig builds the configuration from defaults, then the configuration file
// (FELIX_BROKER_CONFIG, else DefaultConfigFile when it exists: config_file.go), then env
// (lookup, usually os.LookupEnv), then args (flags without the program name). It also
// reports whether --print-config was given. Invalid values, unknown flags, and a missing,
// unreadable or bad file return errors wrapping ErrConfig that name the variable, flag or
// file line.
func LoadConfig(args []string, lookup func(string) (string, bool)) (cfg *Config, printConfig bool, err error) {
	cfg = &Config{sources: map[string]Source{}}
	table := settings()
	for _, s := range table {
		if err := s.set(cfg, s.def); err != nil {
			return nil, false, fmt.Errorf("%w: default of %s: %v", ErrConfig, s.env, err)
		}
		cfg.sources[s.env] = SourceDefault
	}
	if err := applyConfigFile(cfg, table, lookup); err != nil { // config_file.go
		return nil, false, err
	}
	for _, s := range table {
		v, ok := lookup(s.env)
		if !ok {
			continue
		}
		if err := s.set(cfg, v); err != nil {
			return nil, false, fmt.Errorf("%w: %s=%q: %v", ErrConfig, s.env, v, err)
		}
		cfg.sources[s.env] = SourceEnv
	}
	fs := flag.NewFlagSet("felix-broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&printConfig, "print-config", false, "print the effective configuration and exit")
	for _, s := range table {
		s := s
		fs.Func(s.flag, s.help+" ("+s.env+")", func(v string) error {
			if err := s.set(cfg, v); err != nil {
				return fmt.Errorf("%s (--%s)=%q: %v", s.env, s.flag, v, err)
			}
			cfg.sources[s.env] = SourceFlag
			return nil
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, false, ErrHelp
		}
		return nil, false, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if fs.NArg() > 0 {
		return nil, false, fmt.Errorf("%w: unexpected argument %q", ErrConfig, fs.Arg(0))
	}
	if err := cfg.validate(); err != nil {
		return nil, false, err
	}
	return cfg, printConfig, nil
}

// creatableDir checks, without creating anything, that dir exists or can be created: its
// nearest existing ancestor must be a writable directory. FELIX_READY_FILE's directory is
// created at ready time; a path that can never work is a configuration error found before
// the data dir is touched.
func creatableDir(dir string) error {
	for d := dir; ; {
		fi, err := os.Stat(d)
		switch {
		case err == nil && !fi.IsDir():
			return fmt.Errorf("%s is not a directory", d)
		case err == nil:
			if err := syscall.Access(d, 2 /* W_OK */); err != nil && d != dir {
				return fmt.Errorf("cannot create a directory in %s: %v", d, err)
			} else if err != nil {
				return fmt.Errorf("directory %s is not writable: %v", d, err)
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return fmt.Errorf("no existing ancestor of %s", dir)
		}
		d = parent
	}
}

// minFrameBytes is the smallest FELIX_MAX_FRAME_BYTES accepted: below it an auth frame
// with a real token would not fit.
const minFrameBytes = 1024

func (c *Config) validate() error {
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 16 << 20
	}
	if c.MaxFrameBytes < minFrameBytes {
		return fmt.Errorf("%w: FELIX_MAX_FRAME_BYTES=%d: want 0 (16 MiB) or at least %d (an auth frame must fit)", ErrConfig, c.MaxFrameBytes, minFrameBytes)
	}
	if c.ReadyFile != "" {
		if err := creatableDir(filepath.Dir(c.ReadyFile)); err != nil {
			return fmt.Errorf("%w: FELIX_READY_FILE=%s: %v", ErrConfig, c.ReadyFile, err)
		}
	}
	if c.DataDir == "" {
		return fmt.Errorf("%w: FELIX_DURABLE_STORAGE_DIR is empty; the single-node broker keeps its catalog, keys and run-state there", ErrConfig)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("%w: FELIX_TLS_CERT and FELIX_TLS_KEY must be set together", ErrConfig)
	}
	if c.InitialMTU != 0 && c.InitialMTU < 1200 {
		return fmt.Errorf("%w: FELIX_INITIAL_MTU=%d: want 0 or 1200..65527", ErrConfig, c.InitialMTU)
	}
	if c.PublishConnInflightByte < int64(c.MaxFrameBytes) {
		return fmt.Errorf("%w: FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES=%d must be at least FELIX_MAX_FRAME_BYTES=%d", ErrConfig, c.PublishConnInflightByte, c.MaxFrameBytes)
	}
	if c.PublishInflightBytes < c.PublishConnInflightByte {
		return fmt.Errorf("%w: FELIX_BROKER_PUBLISH_INFLIGHT_BYTES=%d is below the per-connection share %d", ErrConfig, c.PublishInflightBytes, c.PublishConnInflightByte)
	}
	// Setting the periodic interval alone implies periodic (spec/config.md §2).
	if c.sources["FELIX_DURABLE_FSYNC_INTERVAL_MS"] != SourceDefault && c.sources["FELIX_DURABLE_FSYNC_MODE"] == SourceDefault {
		c.FsyncMode = FsyncPeriodic
		c.sources["FELIX_DURABLE_FSYNC_MODE"] = c.sources["FELIX_DURABLE_FSYNC_INTERVAL_MS"]
	}
	return c.validateCluster()
}

// SourceOf reports where the variable env's value came from.
func (c *Config) SourceOf(env string) Source { return c.sources[env] }

// PrintConfig writes every setting as "VARIABLE  value  source  (--flag)", sorted by name.
func (c *Config) PrintConfig(w io.Writer) error {
	table := settings()
	sort.Slice(table, func(i, j int) bool { return table[i].env < table[j].env })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tSOURCE\tFLAG")
	for _, s := range table {
		v := s.get(c)
		if v == "" {
			v = `""`
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t--%s\n", s.env, v, c.sources[s.env], s.flag)
	}
	return tw.Flush()
}

// WriteSettingsTable writes the settings as a markdown table (variable, flag, default,
// meaning); docs/operations.md embeds its output.
func WriteSettingsTable(w io.Writer) {
	fmt.Fprintln(w, "| Variable | Flag | Default | Meaning |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, s := range settings() {
		fmt.Fprintf(w, "| `%s` | `--%s` | `%s` | %s |\n", s.env, s.flag, s.def, s.help)
	}
}

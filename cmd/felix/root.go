package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"felix/internal/version"
)

// Defaults of the global flags (docs/cli.md, "Connection and credentials").
const (
	defaultServer    = "127.0.0.1:5000"
	defaultAdminURL  = "http://127.0.0.1:8080"
	defaultTenant    = "default"
	defaultNamespace = "default"
	defaultTimeout   = 30 * time.Second
	// defaultTokenFile is read when no token is given and it exists: the admin token a
	// broker started in the current directory writes (auth.AdminTokenFile in ./felix-data).
	defaultTokenFile = "felix-data/admin.token"
)

// app holds the streams, environment and global flag values of one invocation.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)

	server       string
	adminURL     string
	token        string
	tokenFlagSet bool // --token was on the command line (even as "")
	tokenFile    string
	tenant       string
	namespace    string
	fingerprint  string
	insecure     bool
	insecureErr  error // FELIX_TLS_INSECURE is not a boolean (checked by dial unless --insecure is given)
	jsonOut      bool
	timeout      time.Duration
	raw          bool // --raw of sub and cache get: payloads and values byte for byte (rawflag.go)
}

func newApp(stdin io.Reader, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) *app {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	return &app{stdin: stdin, stdout: stdout, stderr: stderr, lookupEnv: lookupEnv}
}

// env returns the first non-empty value among the named variables, else def.
func (a *app) env(def string, names ...string) string {
	for _, n := range names {
		if v, ok := a.lookupEnv(n); ok && v != "" {
			return v
		}
	}
	return def
}

const rootLong = `felix talks to a Felix broker: publish and subscribe, cache operations, consumer
groups, and the catalog of streams and caches. It also issues tokens and inspects logs on
disk without a broker.

Every connection flag has a FELIX_* default (flags win):
  --server       FELIX_SERVER        QUIC address of the broker      (127.0.0.1:5000)
  --admin        FELIX_ADMIN_URL     broker admin API base URL       (http://127.0.0.1:8080)
  --token        FELIX_TOKEN, FELIX_AUTH_TOKEN
  --token-file   FELIX_TOKEN_FILE    (else ./felix-data/admin.token when it exists)
  --tenant       FELIX_TENANT, FELIX_AUTH_TENANT                     (default)
  --namespace    FELIX_NAMESPACE                                     (default)
  --fingerprint  FELIX_TLS_FINGERPRINT  pin the broker certificate (SHA-256 hex)
  --insecure     FELIX_TLS_INSECURE     accept any broker certificate

Output is text for people; --json prints one JSON object per line for scripts.

Exit codes:
  0 ok                    4 unauthorized or forbidden
  1 failure               5 indeterminate (the outcome is unknown)
  2 usage error           6 overloaded or unavailable (retry later)
  3 not found             7 verification failed (felix log verify found damage)`

// rootCommand builds the command tree.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "felix",
		Short:         "Felix command-line tool",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE:          groupRunE,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.Version = version.Get().Line("felix") // --version (version.go)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withKind(ErrUsage, err) })
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		a.tokenFlagSet = cmd.Flags().Changed("token")
		if cmd.Flags().Changed("insecure") {
			a.insecureErr = nil // the flag wins over the variable
		}
		if err := checkFlagValues(cmd); err != nil {
			return err
		}
		return checkNameFlags(cmd)
	}

	pf := root.PersistentFlags()
	pf.StringVar(&a.server, "server", a.env(defaultServer, "FELIX_SERVER"), "broker QUIC address host:port; several comma-separated are tried in turn (FELIX_SERVER)")
	pf.StringVar(&a.adminURL, "admin", a.env(defaultAdminURL, "FELIX_ADMIN_URL"), "broker admin API base URL; several comma-separated: the first that answers (FELIX_ADMIN_URL)")
	pf.StringVar(&a.token, "token", "", "bearer token (FELIX_TOKEN; an empty one is a usage error)")
	pf.StringVar(&a.tokenFile, "token-file", a.env("", "FELIX_TOKEN_FILE"), "file holding the token (FELIX_TOKEN_FILE; default ./"+defaultTokenFile+" when it exists)")
	pf.StringVar(&a.tenant, "tenant", a.env(defaultTenant, "FELIX_TENANT", "FELIX_AUTH_TENANT"), "tenant (FELIX_TENANT)")
	pf.StringVar(&a.namespace, "namespace", a.env(defaultNamespace, "FELIX_NAMESPACE"), "namespace (FELIX_NAMESPACE)")
	pf.StringVar(&a.fingerprint, "fingerprint", a.env("", "FELIX_TLS_FINGERPRINT"), "pin the broker's TLS certificate: SHA-256 of its DER, hex (FELIX_TLS_FINGERPRINT)")
	pf.BoolVar(&a.insecure, "insecure", a.insecureDefault(), "accept any broker certificate (FELIX_TLS_INSECURE=true)")
	pf.BoolVar(&a.jsonOut, "json", false, "print JSON (one object per line) instead of text")
	pf.DurationVar(&a.timeout, "timeout", defaultTimeout, "deadline of one request (not of sub, watch or a whole publish)")

	root.AddCommand(
		a.readyCommand(),
		a.pubCommand(),
		a.subCommand(),
		a.cacheCommand(),
		a.groupCommand(),
		a.streamCommand(),
		a.tokenCommand(),
		a.logCommand(),
		a.devCommand(),
		a.clusterCommand(),
		a.versionCommand(),
		a.tenantCommand(),    // tenantcmd.go
		a.namespaceCommand(), // namespacecmd.go
	)
	return root
}

// insecureDefault reads FELIX_TLS_INSECURE (unset or empty: false) like the broker reads
// a boolean; a value that is not one is kept in insecureErr for dial to refuse (exit 2).
func (a *app) insecureDefault() bool {
	v := a.env("", "FELIX_TLS_INSECURE")
	if v == "" {
		return false
	}
	b, err := parseBoolValue(v)
	if err != nil {
		a.insecureErr = usagef("FELIX_TLS_INSECURE=%q: %v", v, err)
	}
	return b
}

// groupRunE is the RunE of commands that only hold subcommands: an unknown subcommand or
// a missing one is a usage error.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
	return usagef("%s needs a subcommand", cmd.CommandPath())
}

// nArgs checks the positional argument count (min..max; max < 0 = unlimited) and
// reports a usage error naming the expected form.
func nArgs(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return usagef("usage: %s", cmd.UseLine())
		}
		return nil
	}
}

// nameArgs is nArgs that also refuses, as a usage error, invalid UTF-8 in the first
// names arguments (stream, cache, group names and cache keys): the JSON wire would
// otherwise replace the bad bytes with U+FFFD and act on a different name.
func nameArgs(min, max, names int) cobra.PositionalArgs {
	count := nArgs(min, max)
	return func(cmd *cobra.Command, args []string) error {
		if err := count(cmd, args); err != nil {
			return err
		}
		for i := 0; i < names && i < len(args); i++ {
			if !utf8.ValidString(args[i]) {
				return usagef("argument %d (%q) is not valid UTF-8", i+1, args[i])
			}
		}
		return nil
	}
}

// nameFlags are the global and per-command flags whose values are names sent on the
// wire; checkNameFlags refuses invalid UTF-8 in them like nameArgs.
var nameFlags = []string{"tenant", "namespace", "group", "key", "subject"}

func checkNameFlags(cmd *cobra.Command) error {
	for _, n := range nameFlags {
		f := cmd.Flags().Lookup(n)
		if f == nil || f.Value.Type() != "string" {
			continue
		}
		if v := f.Value.String(); !utf8.ValidString(v) {
			return usagef("--%s %q is not valid UTF-8", n, v)
		}
	}
	return nil
}

// checkFlagValues refuses, as usage errors naming the flag and the allowed range, the
// values of cmd's flags no command accepts: a negative duration (--timeout, --ttl,
// --wait, --after, --idle-exit), a --timeout of 0, and a --shard past 0..4095.
func checkFlagValues(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		switch f.Value.Type() {
		case "duration":
			d, _ := time.ParseDuration(f.Value.String())
			err = checkDuration(f.Name, d)
			if err == nil && f.Name == "timeout" && d == 0 {
				err = usagef("--timeout 0s: want more than 0 (e.g. 30s)")
			}
		case "uint32":
			if f.Name == "shard" {
				n, _ := strconv.ParseUint(f.Value.String(), 10, 32)
				err = checkRange("shard", int64(n), 0, maxShardIndex)
			}
		}
	})
	return err
}

// reportError prints a failed command's error: text on stderr, or a JSON object
// {"error","exit_code"} on stdout under --json.
func (a *app) reportError(err error) {
	code := exitCode(err)
	if a.jsonOut {
		a.printJSON(map[string]any{"error": err.Error(), "exit_code": code})
		return
	}
	fmt.Fprintf(a.stderr, "felix: %v\n", err)
}

// printJSON writes v as one line of JSON on stdout.
func (a *app) printJSON(v any) {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// resolveToken returns the token: --token, else FELIX_TOKEN / FELIX_AUTH_TOKEN (the
// first one set), else the --token-file contents, else ./felix-data/admin.token when it
// exists, else "" (the broker decides whether that is allowed). A token given explicitly
// but empty (--token "", a token variable set to "", an empty --token-file) is a usage
// error: it never falls back to the admin token file. An unreadable explicit token file
// is a usage error.
func (a *app) resolveToken() (string, error) {
	if a.tokenFlagSet {
		if tok := strings.TrimSpace(a.token); tok != "" {
			return tok, nil
		}
		return "", usagef("--token is empty (leave the flag out to use --token-file or ./%s)", defaultTokenFile)
	}
	for _, n := range tokenVars {
		if v, ok := a.lookupEnv(n); ok {
			if tok := strings.TrimSpace(v); tok != "" {
				return tok, nil
			}
			return "", usagef("%s is set but empty (unset it to use --token-file or ./%s)", n, defaultTokenFile)
		}
	}
	if a.token != "" { // set directly (tests), not through the flag or the environment
		return strings.TrimSpace(a.token), nil
	}
	if a.tokenFile != "" {
		data, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return "", withKind(ErrUsage, fmt.Errorf("token file: %w", err))
		}
		tok := strings.TrimSpace(string(data))
		if tok == "" {
			return "", usagef("token file %s is empty", a.tokenFile)
		}
		return tok, nil
	}
	if data, err := os.ReadFile(filepath.FromSlash(defaultTokenFile)); err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	return "", nil
}

// tokenVars are the environment variables holding the token, in order of precedence.
var tokenVars = []string{"FELIX_TOKEN", "FELIX_AUTH_TOKEN"}

// requestContext bounds one request by --timeout and ends on SIGINT/SIGTERM.
func (a *app) requestContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signalContext(parent)
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	return ctx, func() { cancel(); stop() }
}

// signalContext ends on SIGINT or SIGTERM (long-running sub and watch stop cleanly).
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
}

// isLoopback reports whether a host:port names this machine (127.0.0.0/8, ::1,
// localhost).
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errInterrupted is returned by long-running commands stopped by a signal; it is not
// a failure.
var errInterrupted = errors.New("interrupted")

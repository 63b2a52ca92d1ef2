package faultproxy

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// ErrUsage is wrapped by RunCommand's errors for bad arguments (a caller exits 2 on it). -h/--help
// returns flag.ErrHelp after printing the usage (exit 0).
var ErrUsage = errors.New("faultproxy: usage")

// commandArgs is the parsed command line of `felix-chaos proxy`.
type commandArgs struct {
	cfg     Config
	control string
}

// RunCommand implements `felix-chaos proxy --listen A --upstream B --control C --seed N
// [--to-server JSON] [--to-client JSON] [--allow-non-loopback]`. args are the arguments after
// "proxy" (a leading "proxy" is skipped). It prints one ready line to stdout,
//
//	faultproxy listen=127.0.0.1:40001 upstream=127.0.0.1:5000 control=http://127.0.0.1:40002 seed=42
//
// then logs every fault change there (log/slog text) and serves until SIGINT or SIGTERM, when it
// closes the proxy and returns nil. Errors wrap ErrUsage (bad flags), ErrConfig, ErrNotLoopback or
// ErrInvalidFaults, or are socket errors.
func RunCommand(args []string, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return RunCommandContext(ctx, args, stdout)
}

// RunCommandContext is RunCommand stopped by ctx instead of a signal.
func RunCommandContext(ctx context.Context, args []string, stdout io.Writer) error {
	a, err := parseCommand(args, stdout)
	if err != nil {
		return err
	}
	a.cfg.Logger = slog.New(slog.NewTextHandler(stdout, nil))
	p, err := New(a.cfg)
	if err != nil {
		return err
	}
	control := "off"
	if a.control != "" && a.control != "off" {
		addr, err := p.ServeControl(a.control)
		if err != nil {
			p.Close()
			return err
		}
		control = "http://" + addr.String()
	}
	fmt.Fprintf(stdout, "faultproxy listen=%s upstream=%s control=%s seed=%d\n", p.Addr(), p.Upstream(), control, p.Seed())
	<-ctx.Done()
	return p.Close()
}

// parseCommand parses the flags; usage goes to stdout.
func parseCommand(args []string, stdout io.Writer) (commandArgs, error) {
	if len(args) > 0 && args[0] == "proxy" {
		args = args[1:]
	}
	var a commandArgs
	fs := flag.NewFlagSet("felix-chaos proxy", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.StringVar(&a.cfg.Listen, "listen", DefaultListen, "UDP address clients send to (loopback)")
	fs.StringVar(&a.cfg.Upstream, "upstream", "", "UDP address to forward to (loopback; required)")
	fs.StringVar(&a.control, "control", "127.0.0.1:0", `control API address (loopback TCP), or "off"`)
	fs.Uint64Var(&a.cfg.Seed, "seed", 0, "PRNG seed (0: random, printed)")
	toServer := fs.String("to-server", "", `initial client→server faults as JSON, e.g. '{"loss_pct":5}'`)
	toClient := fs.String("to-client", "", "initial server→client faults as JSON")
	fs.BoolVar(&a.cfg.AllowNonLoopback, "allow-non-loopback", false, "allow --listen/--upstream outside 127.0.0.0/8 and ::1")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return a, err
		}
		return a, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return a, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if a.cfg.Upstream == "" {
		return a, fmt.Errorf("%w: --upstream is required", ErrUsage)
	}
	for _, s := range []struct {
		flag string
		text string
		dst  *Faults
	}{{"--to-server", *toServer, &a.cfg.ToServer}, {"--to-client", *toClient, &a.cfg.ToClient}} {
		if s.text == "" {
			continue
		}
		f, err := ParseFaults([]byte(s.text))
		if err != nil {
			return a, fmt.Errorf("%w: %s: %w", ErrUsage, s.flag, err)
		}
		*s.dst = f
	}
	return a, nil
}

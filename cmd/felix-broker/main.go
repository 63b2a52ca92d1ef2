// Command felix-broker runs a single-node Felix broker: data in ./felix-data, clients on
// QUIC :5000, operations and the admin API on HTTP :8080 (docs/operations.md).
//
// Configuration: built-in defaults, then the YAML file FELIX_BROKER_CONFIG names, then
// FELIX_* variables, then flags (felix-broker --help lists them; a set FELIX_* variable
// the broker does not read but that is a few edits from one it does is logged as a
// warning naming the closest); --print-config prints every effective setting with its source and
// exits. An invalid setting (including one found while starting, such as an unusable
// FELIX_READY_FILE directory) exits 2 before the data dir is touched; any other startup
// failure exits 1. SIGTERM or SIGINT drains within FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS and exits
// 0 on a clean stop, 1 otherwise. --version prints the release and commit
// (internal/version) and exits 0.
package main

import (
	"context"
	"errors"
	"felix/clock"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"felix/broker"
	"felix/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Println(version.Get().Line("felix-broker"))
		return 0
	}
	cfg, printConfig, err := broker.LoadConfig(args, os.LookupEnv)
	if errors.Is(err, broker.ErrHelp) {
		broker.Usage(os.Stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "felix-broker:", err)
		return 2
	}
	logger := broker.NewLogger(cfg, os.Stderr)
	for _, t := range broker.EnvTypos(os.Environ()) { // also under --print-config (stderr)
		logger.Warn("unknown variable "+t.Name+" is not read by felix-broker; did you mean "+t.Closest+"?",
			"variable", t.Name, "closest", t.Closest)
	}
	if printConfig {
		if err := cfg.PrintConfig(os.Stdout); err != nil {
			return 1
		}
		return 0
	}
	slog.SetDefault(logger)
	ck, hooked, err := clock.FromEnv(os.LookupEnv)
	if err != nil {
		logger.Error("startup failed", "err", err)
		return 2
	}
	if hooked {
		logger.Warn("test clock hook active: this broker's clock is skewed or slowed (never in production)",
			clock.EnvOffsetMS, os.Getenv(clock.EnvOffsetMS), clock.EnvRate, os.Getenv(clock.EnvRate))
		cfg.Clock = ck
	}
	srv, err := broker.New(cfg, logger)
	if err != nil {
		logger.Error("startup failed", "err", err)
		if errors.Is(err, broker.ErrConfig) {
			return 2
		}
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		logger.Error("stopped", "err", err)
		return 1
	}
	return 0
}

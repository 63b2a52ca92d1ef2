package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"felix/internal/devcluster"
)

// devCommand is `felix dev`: local development helpers.
func (a *app) devCommand() *cobra.Command {
	dev := &cobra.Command{Use: "dev", Short: "Local development helpers (dev cluster)", Args: cobra.ArbitraryArgs, RunE: groupRunE}
	dev.AddCommand(a.devClusterCommand())
	return dev
}

// devClusterCommand is `felix dev cluster` (docs/cli.md, "felix dev cluster"; issue 21
// item 1): internal/devcluster's cluster in the foreground until SIGINT/SIGTERM.
func (a *app) devClusterCommand() *cobra.Command {
	cfg := devcluster.Config{}
	printEnv := false
	cmd := &cobra.Command{
		Use:   "cluster [--brokers N] [--controlplanes N] [--replication-factor R] [--base-port P] [--data-dir DIR] [--bin-dir DIR] [--print-env]",
		Short: "Run a local cluster (control-plane members and brokers as child processes) until Ctrl-C",
		Args:  nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.BinDir == "" {
				cfg.BinDir = executableDir()
			}
			if !cmd.Flags().Changed("replication-factor") {
				cfg.ReplicationFactor = min(devcluster.DefaultReplicationFactor, cfg.Brokers)
			}
			l, err := cfg.Layout()
			if err != nil {
				return withKind(ErrUsage, err)
			}
			if printEnv {
				fmt.Fprint(a.stdout, l.ShellEnv())
				return nil
			}
			return a.runDevCluster(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Brokers, "brokers", devcluster.DefaultBrokers, "number of brokers (1..10)")
	f.IntVar(&cfg.ControlPlanes, "controlplanes", devcluster.DefaultControlPlanes, "number of control-plane members (1..10)")
	f.IntVar(&cfg.ReplicationFactor, "replication-factor", devcluster.DefaultReplicationFactor,
		"the default replication factor of felix cluster stream create (FELIX_REPLICATION_FACTOR in --print-env; 1..brokers)")
	f.IntVar(&cfg.BasePort, "base-port", a.envInt("FELIX_DEV_CLUSTER_BASE_PORT", devcluster.DefaultBasePort),
		"first port of the layout (FELIX_DEV_CLUSTER_BASE_PORT): members at P.., brokers at P+100..")
	f.StringVar(&cfg.DataDir, "data-dir", a.env(devcluster.DefaultDataDir, "FELIX_DEV_CLUSTER_DATA_DIR"),
		"directory of every data dir, log and pid file (FELIX_DEV_CLUSTER_DATA_DIR)")
	f.StringVar(&cfg.BinDir, "bin-dir", "", "directory of felix-controlplane and felix-broker (default: this felix's directory, then PATH)")
	f.BoolVar(&printEnv, "print-env", false, "print the export lines of FELIX_SERVER, FELIX_ADMIN_URL, FELIX_CONTROLPLANE_URL, FELIX_TOKEN_FILE, FELIX_REPLICATION_FACTOR, FELIX_DEV_BROKER1.. for eval, and exit")
	return cmd
}

// envInt is the integer value of the variable name, else def (a non-integer is def too:
// the flag's own parsing reports a bad --base-port).
func (a *app) envInt(name string, def int) int {
	if n, err := strconv.Atoi(a.env("", name)); err == nil {
		return n
	}
	return def
}

// executableDir is the directory of the running felix ("" when unknown).
func executableDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Dir(exe)
}

// runDevCluster starts the cluster, prints its addresses, reports a child's exit while it
// runs, and stops everything on SIGINT/SIGTERM. A start failure exits 1 (the child and the
// tail of its log are in the error); a stop that needed SIGKILL exits 1 too.
func (a *app) runDevCluster(parent context.Context, cfg devcluster.Config) error {
	ctx, stop := signalContext(parent)
	defer stop()
	cfg.Log = a.stderr
	c, err := devcluster.Start(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return errInterrupted
		}
		return err
	}
	a.printDevCluster(c.Layout)
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case e := <-c.Exits():
			fmt.Fprintf(a.stderr, "felix dev cluster: %s exited (%v); the others keep running. Last lines of %s:\n%s\n",
				e.Node.Name, exitErrText(e.Err), e.Node.LogPath, e.Tail)
		}
	}
	fmt.Fprintln(a.stderr, "felix dev cluster: stopping (SIGTERM, then SIGKILL after", devcluster.DefaultStopTimeout.String()+")")
	if err := c.Stop(); err != nil {
		return err
	}
	fmt.Fprintln(a.stderr, "felix dev cluster: stopped")
	return nil
}

func exitErrText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// printDevCluster prints each address, the token files and the environment line.
func (a *app) printDevCluster(l devcluster.Layout) {
	w := a.stdout
	if a.jsonOut {
		a.printJSON(map[string]any{"ready": true, "dir": l.Dir, "controlplanes": l.ControlPlanes, "brokers": l.Brokers,
			"admin_token_file": l.AdminTokenFile(), "controlplane_token_file": l.ControlPlaneTokenFile()})
		return
	}
	fmt.Fprintf(w, "cluster ready in %s\n", l.Dir)
	for _, n := range l.ControlPlanes {
		fmt.Fprintf(w, "  %-8s REST http://%s  raft %s  ready/metrics http://%s  log %s\n", n.Name, n.REST, n.Raft, n.Metrics, n.LogPath)
	}
	for _, n := range l.Brokers {
		fmt.Fprintf(w, "  %-8s client %s  admin/ops http://%s  internal %s  log %s\n", n.Name, n.Client, n.Client, n.Internal, n.LogPath)
	}
	fmt.Fprintf(w, "admin token (tenant default, every broker): %s\n", l.AdminTokenFile())
	fmt.Fprintf(w, "control-plane admin token: %s\n", l.ControlPlaneTokenFile())
	fmt.Fprintf(w, "felix in another shell: eval \"$(felix dev cluster --print-env%s)\"\n", devFlagsEcho(l))
	fmt.Fprintln(w, "Ctrl-C stops the cluster")
}

// devFlagsEcho repeats the flags --print-env needs to give the same layout.
func devFlagsEcho(l devcluster.Layout) string {
	var b strings.Builder
	if n := len(l.Brokers); n != devcluster.DefaultBrokers {
		fmt.Fprintf(&b, " --brokers %d", n)
	}
	if n := len(l.ControlPlanes); n != devcluster.DefaultControlPlanes {
		fmt.Fprintf(&b, " --controlplanes %d", n)
	}
	if port := l.ControlPlanes[0].REST; !strings.HasSuffix(port, ":"+strconv.Itoa(devcluster.DefaultBasePort)) {
		_, p, _ := strings.Cut(port, ":")
		fmt.Fprintf(&b, " --base-port %s", p)
	}
	if wd, err := os.Getwd(); err != nil || filepath.Join(wd, devcluster.DefaultDataDir) != l.Dir {
		fmt.Fprintf(&b, " --data-dir %s", l.Dir)
	}
	return b.String()
}

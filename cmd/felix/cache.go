package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"felix/client"
)

func (a *app) cacheCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Cache values, counters and watches; create, list and delete caches",
		RunE:  groupRunE,
	}
	cmd.AddCommand(a.cachePut(), a.cacheGet(), a.cacheDeleteKey(), a.cacheDelAlias(), a.cacheIncr(), a.cacheCounter(), a.cacheWatch(),
		a.cacheCreate(), a.cacheList(), a.cacheDelete())
	return cmd
}

// valueJSON is how --json shows a cache value: bytesJSON under "value".
func valueJSON(out map[string]any, v []byte) map[string]any {
	return bytesJSON(out, "value", v)
}

// bytesJSON is how --json shows bytes (docs/cli.md, "Output"): out[field] when they are
// UTF-8 text, else out[field+"_base64"] (encoding/json encodes []byte as standard base64).
func bytesJSON(out map[string]any, field string, v []byte) map[string]any {
	if utf8.Valid(v) {
		out[field] = string(v)
	} else {
		out[field+"_base64"] = v
	}
	return out
}

// withClient dials, runs fn with a request context bounded by --timeout, and closes.
func (a *app) withClient(cmd *cobra.Command, fn func(c *client.Client, ctx context.Context) error) error {
	return a.withClientTimeout(cmd, a.timeout, fn)
}

// withClientTimeout is withClient with a request deadline of d.
func (a *app) withClientTimeout(cmd *cobra.Command, d time.Duration, fn func(c *client.Client, ctx context.Context) error) error {
	c, err := a.dial(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return classify(fn(c, ctx))
}

// readValue returns the value argument: args[i] when present, else the --file contents,
// else all of stdin.
func (a *app) readValue(args []string, i int, file string) ([]byte, error) {
	switch {
	case len(args) > i && file != "":
		return nil, usagef("give the value as an argument or with --file, not both")
	case len(args) > i:
		return []byte(args[i]), nil
	case file != "":
		data, err := os.ReadFile(file)
		return data, withKind(ErrUsage, err)
	}
	return io.ReadAll(a.stdin)
}

func (a *app) cachePut() *cobra.Command {
	var (
		ttl  time.Duration
		file string
	)
	cmd := &cobra.Command{
		Use:   "put CACHE KEY [VALUE | --file F | stdin]",
		Short: "Store a value (optionally with a time to live)",
		Args:  nameArgs(2, 3, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			value, err := a.readValue(args, 2, file)
			if err != nil {
				return err
			}
			err = a.withClient(cmd, func(c *client.Client, ctx context.Context) error {
				return c.Put(ctx, args[0], args[1], value, ttl)
			})
			if err != nil {
				return fmt.Errorf("cache put %s %s: %w", args[0], args[1], err)
			}
			a.done(map[string]any{"cache": args[0], "key": args[1], "stored": len(value), "ttl_ms": ttl.Milliseconds()},
				"stored %s (%d bytes)", args[1], len(value))
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "time to live (0 = no expiry)")
	cmd.Flags().StringVar(&file, "file", "", "read the value from this file")
	return cmd
}

func (a *app) cacheGet() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get CACHE KEY [--raw]",
		Short: "Print a value (exit 3 when the key is absent or expired)",
		Args:  nameArgs(2, 2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.checkRaw(false); err != nil { // rawflag.go
				return err
			}
			var (
				value []byte
				found bool
			)
			err := a.withClient(cmd, func(c *client.Client, ctx context.Context) error {
				var err error
				value, found, err = c.Get(ctx, args[0], args[1])
				return err
			})
			if err != nil {
				return fmt.Errorf("cache get %s %s: %w", args[0], args[1], err)
			}
			if !found {
				return withKind(ErrNotFound, fmt.Errorf("cache %s: key %s not found", args[0], args[1]))
			}
			if a.jsonOut {
				a.printJSON(valueJSON(map[string]any{"cache": args[0], "key": args[1], "found": true}, value))
				return nil
			}
			a.stdout.Write(value)
			if !a.raw && (len(value) == 0 || value[len(value)-1] != '\n') {
				fmt.Fprintln(a.stdout)
			}
			return nil
		},
	}
	a.rawFlag(cmd)
	return cmd
}

// cacheDeleteKey is `felix cache delete-key CACHE KEY` (was `cache del`, too close to
// `cache delete`, which deletes the whole cache: issue 23 item 10).
func (a *app) cacheDeleteKey() *cobra.Command {
	return &cobra.Command{
		Use:   "delete-key CACHE KEY",
		Short: "Delete one key and print the removed value (exit 3 when it was absent; the cache stays)",
		Args:  nameArgs(2, 2, 2),
		RunE:  a.runCacheDeleteKey,
	}
}

// cacheDelAlias is the deprecated spelling `cache del CACHE KEY`: hidden, it warns on
// stderr and runs delete-key.
func (a *app) cacheDelAlias() *cobra.Command {
	return &cobra.Command{
		Use:    "del CACHE KEY",
		Short:  "Deprecated: use delete-key",
		Hidden: true,
		Args:   nameArgs(2, 2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(a.stderr, "felix: warning: \"cache del\" is deprecated and will be removed: use \"felix cache delete-key CACHE KEY\" (\"cache delete CACHE\" deletes the whole cache)")
			return a.runCacheDeleteKey(cmd, args)
		},
	}
}

// runCacheDeleteKey deletes args[1] of cache args[0] and prints the removed value.
func (a *app) runCacheDeleteKey(cmd *cobra.Command, args []string) error {
	var (
		removed []byte
		found   bool
	)
	err := a.withClient(cmd, func(c *client.Client, ctx context.Context) error {
		var err error
		removed, found, err = c.Delete(ctx, args[0], args[1])
		return err
	})
	if err != nil {
		return fmt.Errorf("cache delete-key %s %s: %w", args[0], args[1], err)
	}
	if !found {
		return withKind(ErrNotFound, fmt.Errorf("cache %s: key %s not found", args[0], args[1]))
	}
	if a.jsonOut {
		a.printJSON(valueJSON(map[string]any{"cache": args[0], "key": args[1], "deleted": true}, removed))
		return nil
	}
	fmt.Fprintf(a.stdout, "deleted %s (was %s)\n", args[1], strconv.Quote(string(removed)))
	return nil
}

func (a *app) cacheIncr() *cobra.Command {
	var by int64
	cmd := &cobra.Command{
		Use:   "incr CACHE KEY [--by N]",
		Short: "Add to a counter (default 1; negative subtracts) and print its new value",
		Args:  nameArgs(2, 2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var v int64
			err := a.withClient(cmd, func(c *client.Client, ctx context.Context) error {
				var err error
				v, err = c.CounterAdd(ctx, args[0], args[1], by)
				return err
			})
			if err != nil {
				return fmt.Errorf("cache incr %s %s: %w", args[0], args[1], err)
			}
			a.done(map[string]any{"cache": args[0], "key": args[1], "value": v}, "%d", v)
			return nil
		},
	}
	cmd.Flags().Int64Var(&by, "by", 1, "amount to add")
	return cmd
}

func (a *app) cacheCounter() *cobra.Command {
	return &cobra.Command{
		Use:   "counter CACHE KEY",
		Short: "Print a counter's value (exit 3 when it was never added to; 0 is a value)",
		Args:  nameArgs(2, 2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				v     int64
				found bool
			)
			err := a.withClient(cmd, func(c *client.Client, ctx context.Context) error {
				var err error
				v, found, err = c.CounterGet(ctx, args[0], args[1])
				return err
			})
			if err != nil {
				return fmt.Errorf("cache counter %s %s: %w", args[0], args[1], err)
			}
			if !found { // absent, not zero (issue 25): like cache get's miss, nothing on stdout, exit 3
				return withKind(ErrNotFound, fmt.Errorf("cache %s: counter %s not found", args[0], args[1]))
			}
			a.done(map[string]any{"cache": args[0], "key": args[1], "value": v}, "%d", v)
			return nil
		},
	}
}

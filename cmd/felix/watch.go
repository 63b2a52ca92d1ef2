package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"felix/client"
)

// cacheWatch is `felix cache watch CACHE KEY [--prefix] [--count N]`: print every
// committed change of KEY (or of every key starting with KEY) as it happens
// (spec/client-protocol.md §8.4). --from N resumes at offset N of the key's cache shard
// (cache_watch.from_offset, docs/client-protocol.md D16). After a lost connection the SDK
// watches again from the last change's offset + 1; a watch lost before its first change
// without --from fails with exit 5, and the caller re-reads the keys it cares about.
func (a *app) cacheWatch() *cobra.Command {
	var (
		prefix bool
		count  int64
		idle   time.Duration
		from   string
	)
	cmd := &cobra.Command{
		Use:   "watch CACHE KEY [--prefix] [--count N] [--from OFFSET]",
		Short: "Print changes of a key (or of every key with a prefix) as they are committed",
		Long: `Print one line per committed change: "put KEY VALUE", "delete KEY" or "expire KEY"
(--json: {"key","op","value","offset"}). --count N exits after N changes; otherwise watch
runs until interrupted (exit 0). --from OFFSET starts at that offset of the key's cache
shard (replaying the log; a prefix watch needs a cache of one shard). A lost connection is
resumed from the last change's offset + 1; one lost before the first change without
--from ends the watch with exit 5.`,
		Args: nameArgs(2, 2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkNonNegative("count", count); err != nil {
				return err
			}
			opts := client.WatchOptions{Prefix: prefix}
			if from != "" {
				n, err := strconv.ParseUint(from, 10, 64)
				if err != nil {
					return usagef("--from %q: want an offset (a non-negative integer)", from)
				}
				opts.From = client.FromOffset(n)
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			c, err := a.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			wctx, cancel := context.WithTimeout(ctx, a.timeout)
			w, err := c.Watch(wctx, args[0], args[1], opts)
			cancel()
			if err != nil {
				return fmt.Errorf("watch %s %s: %w", args[0], args[1], classify(err))
			}
			defer func() {
				cctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = w.Close(cctx)
				cancel()
			}()
			if a.jsonOut {
				a.printJSON(map[string]any{"watching": args[1], "cache": args[0], "prefix": prefix})
			} else {
				fmt.Fprintf(a.stderr, "watching %s in cache %s\n", args[1], args[0])
			}
			iw := &idleWait{a: a, idle: idle, live: w.Live}
			for n, wait := int64(0), idle; count == 0 || n < count; {
				nctx, cancel := nextCtx(ctx, wait)
				ch, err := w.Next(nctx)
				cancel()
				switch {
				case err != nil && ctx.Err() != nil:
					return nil
				case errors.Is(err, context.DeadlineExceeded):
					if wait = iw.next(); wait <= 0 {
						return nil // --idle-exit
					}
					continue
				case err != nil:
					return a.watchEnded(ctx, c, args[0], args[1], err)
				}
				n, wait = n+1, idle
				iw.seen()
				if a.jsonOut {
					out := map[string]any{"key": ch.Key, "op": string(ch.Op), "offset": ch.Offset}
					if ch.Value != nil {
						valueJSON(out, ch.Value)
					}
					a.printJSON(out)
					continue
				}
				if ch.Op == client.ChangePut {
					fmt.Fprintf(a.stdout, "put %s %s\n", ch.Key, strconv.Quote(string(ch.Value)))
				} else {
					fmt.Fprintf(a.stdout, "%s %s\n", ch.Op, ch.Key)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&prefix, "prefix", false, "watch every key starting with KEY")
	cmd.Flags().Int64Var(&count, "count", 0, "exit after this many changes (0 = run until interrupted)")
	cmd.Flags().StringVar(&from, "from", "", "start at this offset of the key's cache shard (resume = last offset + 1)")
	cmd.Flags().DurationVar(&idle, "idle-exit", 0, "exit (0) after this long without a change (0 = never)")
	return cmd
}

// watchEnded is the error of a watch that ended with err. The broker ends a watch on a
// deleted cache by closing its event stream, which the SDK reports as lost (indeterminate)
// when no change was seen yet; so an indeterminate end is checked with a read of the key:
// when the cache no longer exists the watch ended because of that, and the error is not
// found (exit 3, docs/cli.md), else it stays indeterminate (exit 5).
func (a *app) watchEnded(ctx context.Context, c *client.Client, cache, key string, err error) error {
	err = classify(err)
	if errors.Is(err, ErrIndeterminate) {
		gctx, cancel := context.WithTimeout(ctx, a.timeout)
		_, _, gerr := c.Get(gctx, cache, key)
		cancel()
		if errors.Is(gerr, client.ErrNotFound) {
			return withKind(ErrNotFound, fmt.Errorf("watch %s %s: the cache no longer exists (%w)", cache, key, gerr))
		}
	}
	return fmt.Errorf("watch %s %s: %w", cache, key, err)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"felix/client"
)

// parseStart reads --from: earliest, latest or an offset (spec/client-protocol.md §7).
func parseStart(s string) (client.Start, error) {
	switch strings.ToLower(s) {
	case "earliest":
		return client.Earliest, nil
	case "latest", "":
		return client.Latest, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return client.Start{}, usagef("--from %q: want earliest, latest or an offset", s)
	}
	return client.Offset(n), nil
}

// recordJSON is one delivered record under --json.
func recordJSON(shard uint32, offset *uint64, payload []byte, publisher []byte, extra map[string]any) map[string]any {
	out := map[string]any{"shard": shard}
	if offset != nil {
		out["offset"] = *offset
	}
	bytesJSON(out, "payload", payload)
	if len(publisher) > 0 {
		out["publisher"] = string(publisher)
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// printRecord writes one record: its payload as a line (with --offsets, prefixed by
// "shard/offset "), or a JSON object.
func (a *app) printRecord(shard uint32, offset *uint64, payload, publisher []byte, showOffsets bool, extra map[string]any) {
	if a.jsonOut {
		a.printJSON(recordJSON(shard, offset, payload, publisher, extra))
		return
	}
	if a.raw { // --raw: the payload's bytes, nothing added (rawflag.go)
		a.stdout.Write(payload)
		return
	}
	if showOffsets {
		if offset != nil {
			fmt.Fprintf(a.stdout, "%d/%d ", shard, *offset)
		} else {
			fmt.Fprintf(a.stdout, "%d/- ", shard)
		}
	}
	a.stdout.Write(payload)
	if len(payload) == 0 || payload[len(payload)-1] != '\n' {
		fmt.Fprintln(a.stdout)
	}
}

// subCommand is `felix sub STREAM [--from earliest|latest|N] [--count N] [--group G]`.
func (a *app) subCommand() *cobra.Command {
	var (
		from        string
		count       int64
		group       string
		shards      []uint
		showOffsets bool
		noAck       bool
		idle        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "sub STREAM [--from earliest|latest|N] [--count N] [--group G]",
		Short: "Print records of a stream as they arrive (or lease them in a consumer group)",
		Long: `Without --group: subscribe from --from (latest by default; N is an offset in each
shard) and print every record, one per line (--json: one object per record with shard,
offset and payload). Lost records are reported on stderr ("gap").

With --group G: lease records of the consumer group, print them and acknowledge them
(--no-ack leaves them leased until their lease expires).

--count N exits after N records; otherwise sub runs until interrupted (exit 0).
By default every shard of the stream is read (the shard count comes from the admin API);
--shard picks shards.`,
		Args: nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.checkSubFlags(showOffsets, count); err != nil { // rawflag.go
				return err
			}
			start, err := parseStart(from)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			sh, err := a.streamShards(ctx, args[0], shards)
			if err != nil {
				return err
			}
			c, err := a.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if group != "" {
				if cmd.Flags().Changed("from") {
					return usagef("--from does not apply to --group (the group keeps its own position)")
				}
				err = a.groupConsume(ctx, c, args[0], group, sh, count, !noAck, showOffsets, idle)
			} else {
				err = a.subscribe(ctx, c, args[0], start, sh, count, showOffsets, idle)
			}
			if errors.Is(err, errInterrupted) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "latest", "earliest, latest or an offset")
	f.Int64Var(&count, "count", 0, "exit after this many records (0 = run until interrupted)")
	f.StringVar(&group, "group", "", "consume as this consumer group (leases and acks)")
	f.UintSliceVar(&shards, "shard", nil, "shards to read (default: all shards of the stream)")
	f.BoolVar(&showOffsets, "offsets", false, "prefix each text line with shard/offset")
	f.BoolVar(&noAck, "no-ack", false, "with --group: do not acknowledge the printed records")
	f.DurationVar(&idle, "idle-exit", 0, "exit (0) after this long without a record (0 = never)")
	a.rawFlag(cmd)
	return cmd
}

// streamShards returns the shards to read: --shard when given, else 0..shards-1 from the
// admin API's description of the stream; when the admin API cannot be asked (no
// credential for it, unreachable), shard 0 with a warning on stderr.
func (a *app) streamShards(ctx context.Context, stream string, given []uint) ([]uint32, error) {
	if len(given) > 0 {
		out := make([]uint32, len(given))
		for i, s := range given {
			if s > maxShardIndex {
				return nil, usagef("--shard %d: want 0..%d", s, maxShardIndex)
			}
			out[i] = uint32(s)
		}
		return out, nil
	}
	var info client.StreamInfo
	err := a.adminCall(ctx, func(ctx context.Context, ad *client.Admin) (err error) {
		info, err = ad.DescribeStream(ctx, stream)
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	case err != nil:
		fmt.Fprintf(a.stderr, "felix: reading shard 0 only: the shard count of %s is unknown (admin API: %v); use --shard to choose\n", stream, err)
		return []uint32{0}, nil
	case info.Shards == 0:
		return []uint32{0}, nil
	}
	out := make([]uint32, info.Shards)
	for i := range out {
		out[i] = uint32(i)
	}
	return out, nil
}

// nextCtx bounds one wait for a record by --idle-exit (when set).
func nextCtx(ctx context.Context, idle time.Duration) (context.Context, context.CancelFunc) {
	if idle <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, idle)
}

// idleWait is the --idle-exit rule of `sub` and `cache watch` (docs/cli.md): only time
// while the subscription or watch is live counts. When a wait of d for a record ran out,
// next reports how long to wait again: 0 means exit 0 (live and silent for the whole of
// idle since its latest (re-)subscribe); while live() is false (the connection is lost and
// the SDK is re-subscribing) it warns once per outage on stderr and waits a full idle
// again, so a broker restart never turns into a silent exit.
type idleWait struct {
	a      *app
	idle   time.Duration
	live   func() (bool, time.Time)
	warned bool
}

func (w *idleWait) next() time.Duration {
	live, since := w.live()
	if !live {
		if !w.warned {
			fmt.Fprintf(w.a.stderr, "felix: connection to the broker lost; reconnecting (--idle-exit does not count while disconnected)\n")
			w.warned = true
		}
		return w.first()
	}
	w.seen()
	if w.idle <= 0 {
		return liveCheck // no --idle-exit: never exit, keep watching the connection
	}
	return max(0, w.idle-time.Since(since))
}

// liveCheck is how often, without --idle-exit, sub looks at its connection while no
// record arrives (not cache watch: client.Watch.Next cancels the watch stream when its
// context ends, so a watch is never polled), so that a lost broker is reported ("reconnecting")
// rather than looking like a quiet stream (issue 23 item 10).
const liveCheck = time.Second

// first is the wait for a record: --idle-exit, or liveCheck without it.
func (w *idleWait) first() time.Duration {
	if w.idle <= 0 {
		return liveCheck
	}
	return w.idle
}

// seen notes that the subscription is live again (a record arrived, or live() says so):
// after a "reconnecting" warning it prints "felix: resumed" once.
func (w *idleWait) seen() {
	if w.warned {
		fmt.Fprintf(w.a.stderr, "felix: resumed\n")
		w.warned = false
	}
}

func (a *app) subscribe(ctx context.Context, c *client.Client, stream string, start client.Start, shards []uint32, count int64, showOffsets bool, idle time.Duration) error {
	sctx, cancel := context.WithTimeout(ctx, a.timeout)
	sub, err := c.Subscribe(sctx, stream, start, client.SubscribeOptions{Shards: shards})
	cancel()
	if err != nil {
		return fmt.Errorf("subscribe to %s: %w", stream, classify(err))
	}
	defer sub.Close()
	iw := &idleWait{a: a, idle: idle, live: sub.Live}
	for n, wait := int64(0), iw.first(); count == 0 || n < count; {
		nctx, cancel := nextCtx(ctx, wait)
		rec, err := sub.Next(nctx)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return errInterrupted
		case errors.Is(err, context.DeadlineExceeded):
			if wait = iw.next(); wait <= 0 {
				return errInterrupted // --idle-exit
			}
			continue
		case err != nil:
			return fmt.Errorf("subscription to %s: %w", stream, classify(err))
		}
		n, wait = n+1, iw.first()
		iw.seen()
		var off *uint64
		if rec.HasOffset {
			off = &rec.Offset
		}
		if rec.Gap > 0 {
			if a.jsonOut {
				a.printJSON(map[string]any{"gap": rec.Gap, "shard": rec.Shard})
			} else {
				were := "were"
				if rec.Gap == 1 {
					were = "was"
				}
				fmt.Fprintf(a.stderr, "felix: gap: %s %s dropped before this one on shard %d\n", plural(rec.Gap, "record"), were, rec.Shard)
			}
		}
		a.printRecord(rec.Shard, off, rec.Payload, rec.Publisher, showOffsets, nil)
	}
	return nil
}

// groupConsume polls the group over the shards in turn, prints each leased record and
// acks what it printed (unless ack is false).
func (a *app) groupConsume(ctx context.Context, c *client.Client, stream, group string, shards []uint32, count int64, ack, showOffsets bool, idle time.Duration) error {
	const pollWait = 500 * time.Millisecond
	var n int64
	lastRecord := time.Now()
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			return errInterrupted
		}
		shard := shards[i%len(shards)]
		max := 256
		if count > 0 && count-n < int64(max) {
			max = int(count - n)
		}
		wait := pollWait / time.Duration(len(shards))
		pctx, cancel := context.WithTimeout(ctx, a.timeout+wait)
		recs, err := c.Poll(pctx, stream, shard, group, max, wait)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return errInterrupted
			}
			return fmt.Errorf("group %s poll %s shard %d: %w", group, stream, shard, classify(err))
		}
		offsets := make([]uint64, 0, len(recs))
		for _, r := range recs {
			off := r.Offset
			a.printRecord(r.Shard, &off, r.Payload, []byte(r.Publisher), showOffsets, map[string]any{"delivery": r.Delivery})
			offsets = append(offsets, r.Offset)
		}
		if ack && len(offsets) > 0 {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
			err := c.Ack(actx, stream, shard, group, offsets...)
			cancel()
			if err != nil {
				return fmt.Errorf("group %s ack %s shard %d: %w", group, stream, shard, classify(err))
			}
		}
		n += int64(len(recs))
		if len(recs) > 0 {
			lastRecord = time.Now()
		}
		if count > 0 && n >= count {
			return nil
		}
		if idle > 0 && time.Since(lastRecord) >= idle {
			return errInterrupted
		}
	}
}

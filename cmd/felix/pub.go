package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"felix/client"
	"felix/proto"
)

// maxLineBytes bounds one input line of `felix pub` (a record, without its line ending):
// lines of up to 8 MiB are published (docs/cli.md), well under the frame cap.
const maxLineBytes = 8 << 20

// scanLines calls each with every line of in (without "\n" or "\r\n"; the slice is only
// valid during the call) until each fails, and returns that error, a usage error (exit 2)
// for a line over maxLineBytes, or the read error. A line of exactly maxLineBytes is
// accepted with or without its line ending: the buffer holds it and "\r\n".
func scanLines(in io.Reader, each func(line []byte) error) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes+2)
	tooLong := withKind(ErrUsage, fmt.Errorf("a line is longer than %d bytes (8 MiB)", maxLineBytes))
	for sc.Scan() {
		if len(sc.Bytes()) > maxLineBytes {
			return tooLong
		}
		if err := each(sc.Bytes()); err != nil {
			return err
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return tooLong
	}
	return sc.Err()
}

// pubCommand is `felix pub STREAM [MSG | --file F | lines from stdin] [--key K]`: one record
// from MSG, else one record per line of F or of stdin (the newline is not part of the
// record). --key routes every record to the key's shard (docs/client-protocol.md D15).
// Records go through one client.Publisher (batched, acked per batch); the command exits
// after every record has its outcome. A progress bar (bytes read) is drawn on stderr for
// --file and stdin input when stderr is a terminal.
func (a *app) pubCommand() *cobra.Command {
	var (
		file       string
		key        string
		idempotent bool
		noProgress bool
	)
	cmd := &cobra.Command{
		Use:   "pub STREAM [MSG | --file F | lines from stdin] [--key K]",
		Short: "Publish one record, or one record per input line",
		Long: `Publish to STREAM in --tenant/--namespace. With MSG one record is published and its
offset printed. Otherwise every line of --file F (or of stdin) is a record; a progress bar
shows the bytes read when stderr is a terminal. The command waits for every acknowledgement:
exit 5 (indeterminate) means some records may or may not have been stored.

Without --key the broker spreads records over the stream's shards. With --key K every record
carries the routing key K, so all of them land on the one shard K maps to (the stream's
routing: modulo or jump_hash); the shard is printed with the offset.`,
		Args: nameArgs(1, 2, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 && file != "" {
				return usagef("give MSG or --file, not both")
			}
			if cmd.Flags().Changed("key") && (len(key) < 1 || len(key) > proto.MaxKeyLen) {
				return usagef("--key is %d bytes: want 1..%d bytes (leave --key out for unkeyed records)", len(key), proto.MaxKeyLen)
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			c, err := a.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if len(args) == 2 {
				return a.pubOne(ctx, c, args[0], []byte(key), []byte(args[1]), idempotent)
			}
			in, size, closeIn, err := a.pubInput(file)
			if err != nil {
				return err
			}
			defer closeIn()
			var bar *progressbar.ProgressBar
			if !noProgress && !a.jsonOut && a.stderrIsTerminal() {
				bar = progressbar.DefaultBytes(size, "publishing")
				in = io.TeeReader(in, bar)
			}
			stats, err := a.pubLines(ctx, c, args[0], []byte(key), in, idempotent)
			if bar != nil {
				_ = bar.Finish()
				fmt.Fprintln(a.stderr)
			}
			if err != nil {
				return fmt.Errorf("publish to %s: %s acknowledged, %d failed: %w", args[0], plural(stats.acked, "record"), stats.failed, err)
			}
			a.done(map[string]any{"stream": args[0], "records": stats.acked}, "published %s to %s", plural(stats.acked, "record"), args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "publish each line of this file as a record")
	cmd.Flags().StringVar(&key, "key", "", fmt.Sprintf("routing key for every record (1..%d bytes; broker feature routing_keys)", proto.MaxKeyLen))
	cmd.Flags().BoolVar(&idempotent, "idempotent", false, "idempotent producer: re-send batches whose answer was lost (broker feature idempotent_publish)")
	cmd.Flags().BoolVar(&noProgress, "no-progress", false, "never draw the progress bar")
	return cmd
}

// pubInput opens the record source: --file (its size is known) or stdin (size -1).
func (a *app) pubInput(file string) (io.Reader, int64, func(), error) {
	if file == "" {
		return a.stdin, -1, func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, 0, nil, withKind(ErrUsage, err)
	}
	size := int64(-1)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return f, size, func() { f.Close() }, nil
}

func (a *app) stderrIsTerminal() bool {
	f, ok := a.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// pubOne publishes one record (routed by key unless it is empty) and prints its offset when
// the broker reports one, and its shard when a key was given.
func (a *app) pubOne(ctx context.Context, c *client.Client, stream string, key, payload []byte, idempotent bool) error {
	p, err := c.NewPublisher(stream, client.PublisherOptions{Linger: -1, Offsets: true, Idempotent: idempotent})
	if err != nil {
		return classify(err)
	}
	rctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	res, err := p.PublishKeyedSync(rctx, key, payload)
	closeErr := p.Close(rctx)
	if err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("publish to %s: %w", stream, classifyPublish(err))
	}
	out := map[string]any{"stream": stream, "records": 1}
	if res.HasShard {
		out["shard"] = res.Shard
	}
	if res.HasOffsets && len(key) > 0 && res.HasShard {
		if res.Duplicate {
			out["duplicate"] = true
		}
		out["offset"] = res.FirstOffset
		a.done(out, "published 1 record to %s at offset %d on shard %d", stream, res.FirstOffset, res.Shard)
		return nil
	}
	if res.HasOffsets {
		out["offset"] = res.FirstOffset
		if res.Duplicate {
			out["duplicate"] = true
		}
		a.done(out, "published 1 record to %s at offset %d", stream, res.FirstOffset)
		return nil
	}
	a.done(out, "published 1 record to %s", stream)
	return nil
}

// pubStats counts per-record outcomes of a bulk publish.
type pubStats struct{ acked, failed int64 }

// pubLines publishes each line of in as a record and waits for every outcome. A waiter
// goroutine takes the futures in order from a bounded queue, so memory stays bounded
// however long the input is (the Publisher itself bounds unacknowledged bytes). Reading
// stops at the first failure; the first error is returned.
func (a *app) pubLines(ctx context.Context, c *client.Client, stream string, key []byte, in io.Reader, idempotent bool) (pubStats, error) {
	var stats pubStats
	p, err := c.NewPublisher(stream, client.PublisherOptions{Idempotent: idempotent})
	if err != nil {
		return stats, classify(err)
	}
	wctx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	pending := make(chan client.Pending, 4096)
	waitDone := make(chan error, 1)
	go func() {
		var first error
		for pd := range pending {
			if _, err := pd.Wait(wctx); err != nil {
				stats.failed++
				if first == nil {
					first = err
					cancelWait() // stop the reader; the rest is counted as failed
				}
				continue
			}
			stats.acked++
		}
		waitDone <- first
	}()
	readErr := scanLines(in, func(line []byte) error {
		pd, err := p.PublishKeyed(wctx, key, line)
		if err == nil {
			pending <- pd
		}
		return err
	})
	flushErr := p.Flush(wctx)
	close(pending)
	waitErr := <-waitDone
	closeCtx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	_ = p.Close(closeCtx)
	for _, err := range []error{waitErr, readErr, flushErr} {
		if err != nil {
			return stats, classifyPublish(err)
		}
	}
	return stats, nil
}

// classifyPublish is classify for publishes: a context that ended while acks were
// outstanding leaves their outcome unknown (indeterminate).
func classifyPublish(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return withKind(ErrIndeterminate, err)
	}
	return classify(err)
}

package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"felix/client"
)

// groupCommand is `felix group poll|ack|nack|dlq list|dlq redrive` over the SDK's
// consumer-group calls (spec/client-protocol.md §8.3; docs/groups.md).
func (a *app) groupCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "Consumer groups: lease, ack and nack records; list and redrive dead letters",
		RunE:  groupRunE,
	}
	dlq := &cobra.Command{Use: "dlq", Short: "Dead letters of a group", RunE: groupRunE}
	dlq.AddCommand(a.groupDLQList(), a.groupDLQRedrive())
	cmd.AddCommand(a.groupPoll(), a.groupAck(), a.groupNack(), dlq)
	return cmd
}

// parseOffsets reads OFFSET arguments.
func parseOffsets(args []string) ([]uint64, error) {
	out := make([]uint64, 0, len(args))
	for _, s := range args {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, usagef("offset %q: not a non-negative integer", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// shardFlag adds --shard (one shard, default 0) to cmd.
func shardFlag(cmd *cobra.Command, v *uint32) {
	cmd.Flags().Uint32Var(v, "shard", 0, "the stream shard")
}

func (a *app) groupPoll() *cobra.Command {
	var (
		shard     uint32
		max       int
		wait      time.Duration
		ack, nack bool
		after     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "poll STREAM GROUP [--ack | --nack [--after D]]",
		Short: "Lease up to --max records and print them with offset and delivery count",
		Long: `Lease up to --max records of the group and print "shard/offset delivery=N payload".
A lease belongs to the connection that polled (docs/groups.md), so acknowledge in the same
command: --ack acknowledges the printed records, --nack returns them for redelivery (after
--after). Without either, the leases expire after the group's lease time.`,
		Args: nameArgs(2, 2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRange("max", int64(max), 1, maxRecordsPerPoll); err != nil {
				return err
			}
			if ack && nack {
				return usagef("--ack and --nack exclude each other")
			}
			var recs []client.GroupRecord
			err := a.withClientTimeout(cmd, a.timeout+wait, func(c *client.Client, ctx context.Context) error {
				var err error
				recs, err = c.Poll(ctx, args[0], shard, args[1], max, wait)
				if err != nil || len(recs) == 0 {
					return err
				}
				offsets := make([]uint64, len(recs))
				for i, r := range recs {
					offsets[i] = r.Offset
				}
				switch {
				case ack:
					return c.Ack(ctx, args[0], shard, args[1], offsets...)
				case nack:
					return c.Nack(ctx, args[0], shard, args[1], after, offsets...)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("group %s poll %s: %w", args[1], args[0], err)
			}
			for _, r := range recs {
				off := r.Offset
				if a.jsonOut {
					a.printJSON(recordJSON(r.Shard, &off, r.Payload, []byte(r.Publisher), map[string]any{"delivery": r.Delivery}))
					continue
				}
				fmt.Fprintf(a.stdout, "%d/%d delivery=%d %s\n", r.Shard, r.Offset, r.Delivery, strconv.Quote(string(r.Payload)))
			}
			return nil
		},
	}
	shardFlag(cmd, &shard)
	cmd.Flags().IntVar(&max, "max", 10, fmt.Sprintf("most records to lease (1..%d; the group's max records per poll caps it)", maxRecordsPerPoll))
	cmd.Flags().DurationVar(&wait, "wait", time.Second, "how long to wait for the first record")
	cmd.Flags().BoolVar(&ack, "ack", false, "acknowledge the leased records")
	cmd.Flags().BoolVar(&nack, "nack", false, "return the leased records for redelivery")
	cmd.Flags().DurationVar(&after, "after", 0, "with --nack: redeliver after this delay (0 = the group's default delay)")
	return cmd
}

func (a *app) groupAck() *cobra.Command {
	var shard uint32
	cmd := &cobra.Command{
		Use:   "ack STREAM GROUP OFFSET...",
		Short: "Acknowledge offsets leased to this connection (see poll --ack)",
		Long: `Acknowledge leased offsets. The broker ties a lease to the connection that polled,
so offsets leased by another felix process are refused ("not leased to this consumer");
use "felix group poll --ack" or "felix sub --group" to lease and acknowledge in one go.`,
		Args: nameArgs(3, -1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			offsets, err := parseOffsets(args[2:])
			if err != nil {
				return err
			}
			err = a.withClient(cmd, func(c *client.Client, ctx context.Context) error {
				return c.Ack(ctx, args[0], shard, args[1], offsets...)
			})
			if err != nil {
				return fmt.Errorf("group %s ack %s: %w", args[1], args[0], err)
			}
			a.done(map[string]any{"acked": offsets, "shard": shard}, "acked %s", plural(len(offsets), "offset"))
			return nil
		},
	}
	shardFlag(cmd, &shard)
	return cmd
}

func (a *app) groupNack() *cobra.Command {
	var (
		shard uint32
		after time.Duration
	)
	cmd := &cobra.Command{
		Use:   "nack STREAM GROUP OFFSET...",
		Short: "Return offsets leased to this connection for redelivery (see poll --nack)",
		Long: `Return leased offsets for redelivery after --after. Like ack, only offsets leased by
the same connection are accepted; use "felix group poll --nack" from the CLI.`,
		Args: nameArgs(3, -1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			offsets, err := parseOffsets(args[2:])
			if err != nil {
				return err
			}
			err = a.withClient(cmd, func(c *client.Client, ctx context.Context) error {
				return c.Nack(ctx, args[0], shard, args[1], after, offsets...)
			})
			if err != nil {
				return fmt.Errorf("group %s nack %s: %w", args[1], args[0], err)
			}
			a.done(map[string]any{"nacked": offsets, "shard": shard}, "nacked %s", plural(len(offsets), "offset"))
			return nil
		},
	}
	shardFlag(cmd, &shard)
	cmd.Flags().DurationVar(&after, "after", 0, "redeliver after this delay (0 = the group's default delay)")
	return cmd
}

func (a *app) groupDLQList() *cobra.Command {
	var (
		shard uint32
		from  uint64
		limit int
	)
	cmd := &cobra.Command{
		Use:   "list STREAM GROUP",
		Short: "List dead-lettered offsets (all pages, or up to --limit)",
		Args:  nameArgs(2, 2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkNonNegative("limit", int64(limit)); err != nil {
				return err
			}
			var all []client.DeadLetter
			err := a.withClient(cmd, func(c *client.Client, ctx context.Context) error {
				next := from
				for {
					page := 1000
					if limit > 0 && limit-len(all) < page {
						page = limit - len(all)
					}
					entries, n, more, err := c.DeadLetters(ctx, args[0], shard, args[1], next, page)
					if err != nil {
						return err
					}
					all = append(all, entries...)
					if !more || (limit > 0 && len(all) >= limit) {
						return nil
					}
					next = n
				}
			})
			if err != nil {
				return fmt.Errorf("group %s dead letters of %s: %w", args[1], args[0], err)
			}
			if a.jsonOut {
				for _, d := range all {
					a.printJSON(map[string]any{"shard": shard, "offset": d.Offset, "deliveries": d.Deliveries,
						"dead_lettered_at": d.DeadLetteredAt.UTC().Format(time.RFC3339Nano)})
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "OFFSET\tDELIVERIES\tDEAD-LETTERED AT")
			for _, d := range all {
				fmt.Fprintf(tw, "%d\t%d\t%s\n", d.Offset, d.Deliveries, d.DeadLetteredAt.UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	shardFlag(cmd, &shard)
	cmd.Flags().Uint64Var(&from, "from", 0, "first offset to list")
	cmd.Flags().IntVar(&limit, "limit", 0, "most entries to list (0 = all)")
	return cmd
}

func (a *app) groupDLQRedrive() *cobra.Command {
	var shard uint32
	cmd := &cobra.Command{
		Use:   "redrive STREAM GROUP OFFSET...",
		Short: "Put dead-lettered offsets back into the group",
		Args:  nameArgs(3, -1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			offsets, err := parseOffsets(args[2:])
			if err != nil {
				return err
			}
			var n int
			err = a.withClient(cmd, func(c *client.Client, ctx context.Context) error {
				var err error
				n, err = c.Redrive(ctx, args[0], shard, args[1], offsets...)
				return err
			})
			if err != nil {
				return fmt.Errorf("group %s redrive %s: %w", args[1], args[0], err)
			}
			a.done(map[string]any{"redriven": n, "shard": shard}, "redrove %s", plural(n, "offset"))
			return nil
		},
	}
	shardFlag(cmd, &shard)
	return cmd
}

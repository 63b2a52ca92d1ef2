package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"felix/client"
)

func (a *app) streamCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "stream", Short: "Create, list, describe, show stats of and delete streams (admin API)", RunE: groupRunE}
	cmd.AddCommand(a.streamCreate(), a.streamList(), a.streamDescribe(), a.streamDelete(), a.streamStats()) // stats: streamstats.go
	return cmd
}

func (a *app) streamCreate() *cobra.Command {
	var (
		shards                uint32
		memory                bool
		kind, routing         string
		delivery, consistency string
		maxAge, maxBytes      int64
	)
	cmd := &cobra.Command{
		Use:   "create STREAM",
		Short: "Create a stream",
		Args:  nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkStreamCreate(shards, maxAge, maxBytes); err != nil {
				return err
			}
			spec := client.StreamInfo{Name: args[0], Shards: shards, Durable: !memory, Kind: kind,
				Routing: routing, Delivery: delivery, Consistency: consistency}
			if maxAge > 0 {
				spec.Retention.MaxAgeSeconds = &maxAge
			}
			if maxBytes > 0 {
				spec.Retention.MaxSizeBytes = &maxBytes
			}
			var got client.StreamInfo
			err := a.adminCall(cmd.Context(), func(ctx context.Context, ad *client.Admin) (err error) {
				got, err = ad.CreateStream(ctx, spec)
				return err
			})
			if err != nil {
				return fmt.Errorf("create stream %s: %w", args[0], err)
			}
			if a.jsonOut {
				a.printJSON(got)
				return nil
			}
			storage := "durable"
			if !got.Durable {
				storage = "in-memory"
			}
			fmt.Fprintf(a.stdout, "created stream %s/%s/%s (%s, %s)\n", got.Tenant, got.Namespace, got.Name, plural(got.Shards, "shard"), storage)
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&shards, "shards", 1, "number of shards (1..4096)")
	f.BoolVar(&memory, "memory", false, "keep the stream in memory only (not durable)")
	f.StringVar(&kind, "kind", "", "Stream (default), or Queue: read through consumer groups only; durable streams only")
	f.StringVar(&routing, "routing", "", "key routing: modulo or jump_hash (broker default: modulo)")
	f.StringVar(&delivery, "delivery", "", "AtMostOnce (default), or AtLeastOnce: only acknowledged publishes are accepted; durable streams only")
	f.StringVar(&consistency, "consistency", "", "Leader (default), or Quorum: ack once on disk (fsync before every ack); durable streams only")
	f.Int64Var(&maxAge, "retention-seconds", 0, "drop sealed segments whose newest record is older than this (0 = the broker's FELIX_DURABLE_RETENTION_SECONDS); durable streams only")
	f.Int64Var(&maxBytes, "retention-bytes", 0, "keep about this many bytes per shard, dropping the oldest sealed segments (0 = the broker's FELIX_DURABLE_RETENTION_BYTES); durable streams only")
	return cmd
}

// checkStreamCreate refuses, as usage errors naming the flag, the stream create values the
// admin API would refuse: --shards outside 1..4096, a negative retention bound.
func checkStreamCreate(shards uint32, maxAge, maxBytes int64) error {
	if err := checkRange("shards", int64(shards), 1, maxShardCount); err != nil {
		return err
	}
	if err := checkNonNegative("retention-seconds", maxAge); err != nil {
		return err
	}
	return checkNonNegative("retention-bytes", maxBytes)
}

func (a *app) streamList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the streams of the namespace",
		Args:  nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []client.StreamInfo
			err := a.adminCall(cmd.Context(), func(ctx context.Context, ad *client.Admin) (err error) {
				list, err = ad.ListStreams(ctx)
				return err
			})
			if err != nil {
				return fmt.Errorf("list streams: %w", err)
			}
			if a.jsonOut {
				for _, s := range list {
					a.printJSON(s)
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "STREAM\tSHARDS\tDURABLE\tKIND\tROUTING")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%d\t%t\t%s\t%s\n", s.Name, s.Shards, s.Durable, s.Kind, s.Routing)
			}
			return tw.Flush()
		},
	}
}

func (a *app) streamDescribe() *cobra.Command {
	return &cobra.Command{
		Use:   "describe STREAM",
		Short: "Show one stream's settings",
		Args:  nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var s client.StreamInfo
			err := a.adminCall(cmd.Context(), func(ctx context.Context, ad *client.Admin) (err error) {
				s, err = ad.DescribeStream(ctx, args[0])
				return err
			})
			if err != nil {
				return fmt.Errorf("describe stream %s: %w", args[0], err)
			}
			if a.jsonOut {
				a.printJSON(s)
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "stream:\t%s/%s/%s\n", s.Tenant, s.Namespace, s.Name)
			fmt.Fprintf(tw, "kind:\t%s\n", s.Kind)
			fmt.Fprintf(tw, "shards:\t%d\n", s.Shards)
			fmt.Fprintf(tw, "durable:\t%t\n", s.Durable)
			fmt.Fprintf(tw, "routing:\t%s\n", s.Routing)
			fmt.Fprintf(tw, "consistency:\t%s\n", s.Consistency)
			fmt.Fprintf(tw, "delivery:\t%s\n", s.Delivery)
			fmt.Fprintf(tw, "retention:\t%s\n", retentionText(s.Retention))
			for _, st := range s.ShardStats { // issue 23 item 5
				fmt.Fprintf(tw, "shard %d:\t%s\n", st.Shard, shardStatsText(st))
			}
			for _, d := range s.Damaged { // issue 23: docs/operations.md "Storage faults"
				state := "serving around it"
				if !d.Readable {
					state = "down: run felix log repair"
				}
				fmt.Fprintf(tw, "damaged:\tshard %d: %s in segment %s at byte %d (offset %d unreadable; %s)\n",
					d.Shard, d.Kind, d.Segment, d.AtByte, d.Offset, state)
			}
			return tw.Flush()
		},
	}
}

// shardStatsText is one shard's line of stream describe: its offsets, records and bytes.
func shardStatsText(st client.ShardStats) string {
	switch {
	case !st.Open:
		return "not open on this broker"
	case st.FirstOffset == nil || st.LastOffset == nil:
		return fmt.Sprintf("empty, %d bytes", st.Bytes)
	}
	return fmt.Sprintf("offsets %d..%d, %s, %d bytes", *st.FirstOffset, *st.LastOffset, plural(st.Records, "record"), st.Bytes)
}

func retentionText(r client.Retention) string {
	var parts []string
	if r.MaxAgeSeconds != nil && *r.MaxAgeSeconds > 0 {
		parts = append(parts, fmt.Sprintf("max_age_seconds=%d", *r.MaxAgeSeconds))
	}
	if r.MaxSizeBytes != nil && *r.MaxSizeBytes > 0 {
		parts = append(parts, fmt.Sprintf("max_size_bytes=%d", *r.MaxSizeBytes))
	}
	if len(parts) == 0 {
		return "unlimited"
	}
	return strings.Join(parts, " ")
}

func (a *app) streamDelete() *cobra.Command {
	var yes *bool
	cmd := &cobra.Command{
		Use:   "delete STREAM [--yes]",
		Short: "Delete a stream and its data (asks for its name unless --yes)",
		Args:  nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.confirmDelete("stream", args[0], *yes); err != nil { // confirm.go
				return err
			}
			err := a.adminCall(cmd.Context(), func(ctx context.Context, ad *client.Admin) error {
				return ad.DeleteStream(ctx, args[0])
			})
			if err != nil {
				return fmt.Errorf("delete stream %s: %w", args[0], err)
			}
			a.done(map[string]any{"deleted": "stream", "stream": args[0]}, "deleted stream %s/%s/%s", a.tenant, a.namespace, args[0])
			return nil
		},
	}
	yes = addYesFlag(cmd)
	return cmd
}

func (a *app) cacheCreate() *cobra.Command {
	var (
		shards uint32
		memory bool
	)
	cmd := &cobra.Command{
		Use:   "create CACHE",
		Short: "Create a cache (admin API)",
		Args:  nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRange("shards", int64(shards), 1, maxShardCount); err != nil {
				return err
			}
			durable := !memory
			var got client.CacheInfo
			err := a.adminCall(cmd.Context(), func(ctx context.Context, ad *client.Admin) (err error) {
				got, err = ad.CreateCache(ctx, client.CacheInfo{Name: args[0], Shards: shards, Durable: &durable})
				return err
			})
			if err != nil {
				return fmt.Errorf("create cache %s: %w", args[0], err)
			}
			if a.jsonOut {
				a.printJSON(got)
				return nil
			}
			fmt.Fprintf(a.stdout, "created cache %s/%s/%s (%s)\n", got.Tenant, got.Namespace, got.Name, plural(got.Shards, "shard"))
			return nil
		},
	}
	cmd.Flags().Uint32Var(&shards, "shards", 1, "number of shards (1..4096)")
	cmd.Flags().BoolVar(&memory, "memory", false, "keep the cache in memory only (no cache log)")
	return cmd
}

func (a *app) cacheList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the caches of the namespace (admin API)",
		Args:  nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []client.CacheInfo
			err := a.adminCall(cmd.Context(), func(ctx context.Context, ad *client.Admin) (err error) {
				list, err = ad.ListCaches(ctx)
				return err
			})
			if err != nil {
				return fmt.Errorf("list caches: %w", err)
			}
			if a.jsonOut {
				for _, c := range list {
					a.printJSON(c)
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CACHE\tSHARDS\tDURABLE")
			for _, c := range list {
				fmt.Fprintf(tw, "%s\t%d\t%t\n", c.Name, c.Shards, c.Durable == nil || *c.Durable)
			}
			return tw.Flush()
		},
	}
}

func (a *app) cacheDelete() *cobra.Command {
	var yes *bool
	cmd := &cobra.Command{
		Use:   "delete CACHE [--yes]",
		Short: "Delete a cache and all its keys (admin API; asks for its name unless --yes)",
		Args:  nameArgs(1, 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.confirmDelete("cache", args[0], *yes); err != nil { // confirm.go
				return err
			}
			err := a.adminCall(cmd.Context(), func(ctx context.Context, ad *client.Admin) error {
				return ad.DeleteCache(ctx, args[0])
			})
			if err != nil {
				return fmt.Errorf("delete cache %s: %w", args[0], err)
			}
			a.done(map[string]any{"deleted": "cache", "cache": args[0]}, "deleted cache %s/%s/%s", a.tenant, a.namespace, args[0])
			return nil
		},
	}
	yes = addYesFlag(cmd)
	return cmd
}

// adminCall runs fn with a client.Admin for --admin (the broker's admin HTTP API,
// docs/operations.md) in --tenant/--namespace with the resolved token, bounded by
// --timeout; the error carries the CLI's failure kind (classify).
func (a *app) adminCall(parent context.Context, fn func(ctx context.Context, ad *client.Admin) error) error {
	token, err := a.resolveToken()
	if err != nil {
		return err
	}
	base, err := a.adminBase(parent) // the first of several --admin URLs that answers (conn.go)
	if err != nil {
		return err
	}
	ad, err := client.NewAdmin(base, client.AdminToken(token), client.AdminTenant(a.tenant), client.AdminNamespace(a.namespace))
	if err != nil {
		return classify(err)
	}
	ctx, cancel := a.requestContext(parent)
	defer cancel()
	return classify(fn(ctx, ad))
}

// done prints a command's result: v under --json, else the formatted line.
func (a *app) done(v any, format string, args ...any) {
	if a.jsonOut {
		a.printJSON(v)
		return
	}
	fmt.Fprintf(a.stdout, format+"\n", args...)
}

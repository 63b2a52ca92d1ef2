package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// streamInfo is a stream as the admin API shows it (broker.Stream; spec/auth.md §1).
type streamInfo struct {
	TenantID    string         `json:"tenant_id"`
	Namespace   string         `json:"namespace"`
	Stream      string         `json:"stream"`
	Kind        string         `json:"kind,omitempty"`
	Shards      uint32         `json:"shards,omitempty"`
	Retention   map[string]any `json:"retention,omitempty"`
	Consistency string         `json:"consistency,omitempty"`
	Delivery    string         `json:"delivery,omitempty"`
	Durable     bool           `json:"durable"`
	Routing     string         `json:"routing,omitempty"`
}

// cacheInfo is a cache as the admin API shows it (broker.Cache).
type cacheInfo struct {
	TenantID    string `json:"tenant_id"`
	Namespace   string `json:"namespace"`
	Cache       string `json:"cache"`
	DisplayName string `json:"display_name,omitempty"`
	Shards      uint32 `json:"shards,omitempty"`
	Durable     *bool  `json:"durable,omitempty"`
}

func (a *app) streamCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "stream", Short: "Create, list, describe and delete streams (admin API)", RunE: groupRunE}
	cmd.AddCommand(a.streamCreate(), a.streamList(), a.streamDescribe(), a.streamDelete())
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
		Args:  nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"stream": args[0], "shards": shards, "durable": !memory}
			for k, v := range map[string]string{"kind": kind, "routing": routing, "delivery": delivery, "consistency": consistency} {
				if v != "" {
					body[k] = v
				}
			}
			ret := map[string]int64{}
			if maxAge > 0 {
				ret["max_age_seconds"] = maxAge
			}
			if maxBytes > 0 {
				ret["max_size_bytes"] = maxBytes
			}
			if len(ret) > 0 {
				body["retention"] = ret
			}
			var got streamInfo
			err := a.adminCall(cmd.Context(), "POST", nsPath(a.tenant, a.namespace, "streams"), body, &got)
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
			fmt.Fprintf(a.stdout, "created stream %s/%s/%s (%d shards, %s)\n", got.TenantID, got.Namespace, got.Stream, got.Shards, storage)
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&shards, "shards", 1, "number of shards (1..4096)")
	f.BoolVar(&memory, "memory", false, "keep the stream in memory only (not durable)")
	f.StringVar(&kind, "kind", "", "Stream or Queue (broker default: Stream)")
	f.StringVar(&routing, "routing", "", "key routing: modulo or jump_hash (broker default: modulo)")
	f.StringVar(&delivery, "delivery", "", "AtMostOnce or AtLeastOnce")
	f.StringVar(&consistency, "consistency", "", "Leader or Quorum")
	f.Int64Var(&maxAge, "retention-seconds", 0, "drop records older than this many seconds (0 = keep)")
	f.Int64Var(&maxBytes, "retention-bytes", 0, "keep at most this many bytes per shard (0 = unlimited)")
	return cmd
}

func (a *app) streamList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the streams of the namespace",
		Args:  nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []streamInfo
			if err := a.adminCall(cmd.Context(), "GET", nsPath(a.tenant, a.namespace, "streams"), nil, &list); err != nil {
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
				fmt.Fprintf(tw, "%s\t%d\t%t\t%s\t%s\n", s.Stream, s.Shards, s.Durable, s.Kind, s.Routing)
			}
			return tw.Flush()
		},
	}
}

func (a *app) streamDescribe() *cobra.Command {
	return &cobra.Command{
		Use:   "describe STREAM",
		Short: "Show one stream's settings",
		Args:  nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var s streamInfo
			if err := a.adminCall(cmd.Context(), "GET", nsPath(a.tenant, a.namespace, "streams", args[0]), nil, &s); err != nil {
				return fmt.Errorf("describe stream %s: %w", args[0], err)
			}
			if a.jsonOut {
				a.printJSON(s)
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "stream:\t%s/%s/%s\n", s.TenantID, s.Namespace, s.Stream)
			fmt.Fprintf(tw, "kind:\t%s\n", s.Kind)
			fmt.Fprintf(tw, "shards:\t%d\n", s.Shards)
			fmt.Fprintf(tw, "durable:\t%t\n", s.Durable)
			fmt.Fprintf(tw, "routing:\t%s\n", s.Routing)
			fmt.Fprintf(tw, "consistency:\t%s\n", s.Consistency)
			fmt.Fprintf(tw, "delivery:\t%s\n", s.Delivery)
			fmt.Fprintf(tw, "retention:\t%s\n", retentionText(s.Retention))
			return tw.Flush()
		},
	}
}

func retentionText(r map[string]any) string {
	if len(r) == 0 {
		return "unlimited"
	}
	out := ""
	if v, ok := r["max_age_seconds"]; ok {
		out += fmt.Sprintf("max_age_seconds=%v ", v)
	}
	if v, ok := r["max_size_bytes"]; ok {
		out += fmt.Sprintf("max_size_bytes=%v ", v)
	}
	if out == "" {
		return "unlimited"
	}
	return out[:len(out)-1]
}

func (a *app) streamDelete() *cobra.Command {
	return &cobra.Command{
		Use:   "delete STREAM",
		Short: "Delete a stream and its data",
		Args:  nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.adminCall(cmd.Context(), "DELETE", nsPath(a.tenant, a.namespace, "streams", args[0]), nil, nil); err != nil {
				return fmt.Errorf("delete stream %s: %w", args[0], err)
			}
			a.done(map[string]any{"deleted": "stream", "stream": args[0]}, "deleted stream %s/%s/%s", a.tenant, a.namespace, args[0])
			return nil
		},
	}
}

func (a *app) cacheCreate() *cobra.Command {
	var (
		shards uint32
		memory bool
	)
	cmd := &cobra.Command{
		Use:   "create CACHE",
		Short: "Create a cache (admin API)",
		Args:  nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			durable := !memory
			body := cacheInfo{Cache: args[0], Shards: shards, Durable: &durable}
			var got cacheInfo
			if err := a.adminCall(cmd.Context(), "POST", nsPath(a.tenant, a.namespace, "caches"), body, &got); err != nil {
				return fmt.Errorf("create cache %s: %w", args[0], err)
			}
			if a.jsonOut {
				a.printJSON(got)
				return nil
			}
			fmt.Fprintf(a.stdout, "created cache %s/%s/%s (%d shards)\n", got.TenantID, got.Namespace, got.Cache, got.Shards)
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
			var list []cacheInfo
			if err := a.adminCall(cmd.Context(), "GET", nsPath(a.tenant, a.namespace, "caches"), nil, &list); err != nil {
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
				fmt.Fprintf(tw, "%s\t%d\t%t\n", c.Cache, c.Shards, c.Durable == nil || *c.Durable)
			}
			return tw.Flush()
		},
	}
}

func (a *app) cacheDelete() *cobra.Command {
	return &cobra.Command{
		Use:   "delete CACHE",
		Short: "Delete a cache and its data (admin API)",
		Args:  nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.adminCall(cmd.Context(), "DELETE", nsPath(a.tenant, a.namespace, "caches", args[0]), nil, nil); err != nil {
				return fmt.Errorf("delete cache %s: %w", args[0], err)
			}
			a.done(map[string]any{"deleted": "cache", "cache": args[0]}, "deleted cache %s/%s/%s", a.tenant, a.namespace, args[0])
			return nil
		},
	}
}

// adminCall runs one admin API request bounded by --timeout.
func (a *app) adminCall(parent context.Context, method, path string, body, out any) error {
	c, err := a.admin()
	if err != nil {
		return err
	}
	ctx, cancel := a.requestContext(parent)
	defer cancel()
	return c.do(ctx, method, path, body, out)
}

// done prints a command's result: v under --json, else the formatted line.
func (a *app) done(v any, format string, args ...any) {
	if a.jsonOut {
		a.printJSON(v)
		return
	}
	fmt.Fprintf(a.stdout, format+"\n", args...)
}

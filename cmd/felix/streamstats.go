package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"felix/client"
)

// streamStats is `felix stream stats STREAM [STREAM...]`: one row per shard with its first
// and last offset, records and bytes on the broker answering (GET .../streams/{s}
// shard_stats), and the totals per stream (issue 23 item 10). --json prints one object per
// shard: {"stream","shard","open","first_offset","last_offset","records","bytes"}.
func (a *app) streamStats() *cobra.Command {
	return &cobra.Command{
		Use:   "stats STREAM [STREAM...]",
		Short: "Per-shard offsets, records and bytes of streams (admin API)",
		Args:  nameArgs(1, -1, 64),
		RunE: func(cmd *cobra.Command, args []string) error {
			infos := make([]client.StreamInfo, len(args))
			for i, name := range args {
				err := a.adminCall(cmd.Context(), func(ctx context.Context, ad *client.Admin) error {
					var err error
					infos[i], err = ad.DescribeStream(ctx, name)
					return err
				})
				if err != nil {
					return fmt.Errorf("stream stats %s: %w", name, err)
				}
			}
			a.printStreamStats(args, infos)
			return nil
		},
	}
}

func (a *app) printStreamStats(names []string, infos []client.StreamInfo) {
	type row struct {
		stream string
		st     client.ShardStats
	}
	var rows []row
	for i, info := range infos {
		for _, st := range info.ShardStats {
			rows = append(rows, row{names[i], st})
		}
	}
	a.printTable(len(rows), "STREAM\tSHARD\tFIRST\tLAST\tRECORDS\tBYTES", func(i int) (any, string) {
		r := rows[i]
		v := map[string]any{"stream": r.stream, "shard": r.st.Shard, "open": r.st.Open, "records": r.st.Records, "bytes": r.st.Bytes}
		first, last := "-", "-"
		if r.st.FirstOffset != nil && r.st.LastOffset != nil {
			v["first_offset"], v["last_offset"] = *r.st.FirstOffset, *r.st.LastOffset
			first, last = strconv.FormatUint(*r.st.FirstOffset, 10), strconv.FormatUint(*r.st.LastOffset, 10)
		}
		if !r.st.Open {
			first, last = "not open here", ""
		}
		return v, fmt.Sprintf("%s\t%d\t%s\t%s\t%d\t%d", r.stream, r.st.Shard, first, last, r.st.Records, r.st.Bytes)
	})
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

type statsFlags struct {
	db, output string
}

func newStatsCmd() *cobra.Command {
	var f statsFlags
	cmd := &cobra.Command{
		Use:   "stats --db FILE [-o table|json]",
		Short: "Print the journal's resource, size, offsets, retention and consumers, and a running watch's status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStats(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	addDBFlag(cmd, &f.db)
	addOutputFlag(cmd, &f.output)
	return cmd
}

// runStats prints the file's statistics, its retention and its consumers'
// lag and, when a watch holds the file, the watch's status: its phase, last
// error and the reconcile loop's counters (reconcile.Status).
func runStats(ctx context.Context, out io.Writer, f statsFlags) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	src, err := openSource(ctx, f.db)
	if err != nil {
		return err
	}
	st, err := src.Stats(ctx)
	if err != nil {
		return err
	}
	cs, err := src.Consumers(ctx)
	if err != nil {
		return err
	}
	ret, err := src.Retention(ctx)
	if err != nil {
		return err
	}
	ws, err := src.Status(ctx)
	if err != nil {
		return err
	}
	if f.output == "json" {
		jr := inspect.NewRetention(ret)
		js := jsonStats{Stats: inspect.NewStats(st), Retention: &jr, Writer: ws}
		js.Lag = make(map[string]uint64, len(cs))
		for _, c := range cs {
			js.Lag[c.Name] = c.Lag
		}
		return json.NewEncoder(out).Encode(js)
	}
	res := "-"
	if st.Resource.GVR.Resource != "" {
		res = resourceText(ctx, src, st.Resource)
	}
	consumers := make([]string, len(cs))
	for i, c := range cs {
		consumers[i] = fmt.Sprintf("%s=%d (lag %d)", c.Name, c.Committed, c.Lag)
	}
	tw := newTable(out)
	fmt.Fprintf(tw, "resource\t%s\n", res)
	fmt.Fprintf(tw, "objects\t%d\n", st.Objects)
	fmt.Fprintf(tw, "first offset\t%d\n", st.FirstOffset)
	fmt.Fprintf(tw, "last offset\t%d\n", st.LastOffset)
	fmt.Fprintf(tw, "resourceVersion\t%s\n", orDash(st.ResourceVersion))
	fmt.Fprintf(tw, "file size\t%d bytes\n", st.FileSize)
	fmt.Fprintf(tw, "journal size\t%d bytes\n", st.JournalBytes)
	fmt.Fprintf(tw, "retention\t%s\n", formatRetention(ret))
	fmt.Fprintf(tw, "consumers\t%s\n", orDash(strings.Join(consumers, ", ")))
	if ws != nil {
		fmt.Fprintf(tw, "phase\t%s\n", ws.Phase)
		if reconcile.Phase(ws.Phase) == reconcile.PhaseListing {
			fmt.Fprintf(tw, "list progress\t%d pages, %d objects so far\n", ws.ListPages, ws.ListObjects)
		}
		if reconcile.ShardMode(ws.ShardMode) != reconcile.ShardNone {
			fmt.Fprintf(tw, "shard mode\t%s\n", shardModeText(reconcile.ShardMode(ws.ShardMode)))
		}
		fmt.Fprintf(tw, "last error\t%s\n", orDash(ws.LastError))
		fmt.Fprintf(tw, "list mode\t%s\n", listModeText(ws))
		if ws.Encoding != "" {
			fmt.Fprintf(tw, "encoding\t%s\n", ws.Encoding)
		}
		fmt.Fprintf(tw, "lists\t%d\n", ws.Lists)
		fmt.Fprintf(tw, "watches\t%d\n", ws.Watches)
		fmt.Fprintf(tw, "410s\t%d\n", ws.Gone)
		fmt.Fprintf(tw, "idle restarts\t%d\n", ws.IdleRestarts)
		fmt.Fprintf(tw, "verifies\t%d\n", ws.Verifies)
		fmt.Fprintf(tw, "divergences\t%d\n", ws.Divergences)
	}
	return tw.Flush()
}

// listModeText is the list mode of a watch and why: "streaming (the
// apiserver serves streaming lists)", "paginated (<the server's refusal>)".
func listModeText(ws *inspect.Status) string {
	if ws.ListMode == "" {
		return "-"
	}
	if ws.ListModeReason == "" {
		return string(ws.ListMode)
	}
	return fmt.Sprintf("%s (%s)", ws.ListMode, ws.ListModeReason)
}

// shardModeText says how a sharded watch keeps to its range.
func shardModeText(m reconcile.ShardMode) string {
	switch m {
	case reconcile.ShardServer:
		return "server (the apiserver filters: shardSelector)"
	case reconcile.ShardClient:
		return "client (the apiserver does not serve shardSelector: the watch filters)"
	}
	return string(m)
}

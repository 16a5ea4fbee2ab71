package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

func newStatsCmd() *cobra.Command {
	return newFileCmd(&cobra.Command{
		Use:   "stats --db FILE|DIR [-o table|json]",
		Short: "Print the journal's resource, size, offsets, retention and consumers, and a running watch's status; for a directory (a jcache cache directory), one line per file",
		Args:  cobra.NoArgs,
	}, tableOrJSON, runStats)
}

// runStats prints the file's statistics, its retention and its consumers'
// lag and, when a watch holds the file, the watch's status: its phase, last
// error and the reconcile loop's counters (reconcile.Status).
func runStats(ctx context.Context, out io.Writer, f fileFlags) error {
	if fi, err := os.Stat(f.db); err == nil && fi.IsDir() {
		return runDirStats(ctx, out, f)
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

// dirFileStats is one file of a directory as stats -o json prints it:
// the file's statistics and retention, how they were read, or why the
// file could not be read.
type dirFileStats struct {
	File string `json:"file"`
	*inspect.Stats
	Retention *inspect.Retention `json:"retention,omitempty"`
	// Via is "file" (a read-only open) or "socket" (the writer's inspect
	// socket, FILE.sock, while a writer holds the file).
	Via   string `json:"via,omitempty"`
	Error string `json:"error,omitempty"`

	ret journal.Retention
}

// runDirStats prints one line per journal file (*.db) of the directory
// f.db, as a jcache cache directory holds them (one per resource and
// scope): resource, objects, retained events, sizes, retention. A file a
// running writer holds is read through its inspect socket; one held by a
// writer that serves none is listed with the reason, and the command then
// fails after printing the others.
func runDirStats(ctx context.Context, out io.Writer, f fileFlags) error {
	paths, err := filepath.Glob(filepath.Join(f.db, "*.db"))
	if err != nil {
		return err
	}
	slices.Sort(paths)
	rows := make([]dirFileStats, 0, len(paths))
	failed := 0
	for _, p := range paths {
		row := dirFileStats{File: filepath.Base(p)}
		err := func() error {
			src, err := openSource(ctx, p)
			if err != nil {
				return err
			}
			st, err := src.Stats(ctx)
			if err != nil {
				return err
			}
			ret, err := src.Retention(ctx)
			if err != nil {
				return err
			}
			js, jr := inspect.NewStats(st), inspect.NewRetention(ret)
			row.Stats, row.Retention, row.Via, row.ret = &js, &jr, "file", ret
			if _, ok := src.(fileSource); !ok {
				row.Via = "socket"
			}
			return nil
		}()
		if err != nil {
			row.Error = err.Error()
			failed++
		}
		rows = append(rows, row)
	}
	if f.output == "json" {
		if err := json.NewEncoder(out).Encode(rows); err != nil {
			return err
		}
	} else {
		tw := newTable(out)
		fmt.Fprintln(tw, "FILE\tRESOURCE\tOBJECTS\tEVENTS\tOFFSETS\tJOURNAL\tFILE SIZE\tRETENTION\tVIA")
		for _, r := range rows {
			if r.Stats == nil {
				fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\tunreadable: %s\n", r.File, r.Error)
				continue
			}
			st := r.Stats
			events, offsets := uint64(0), "-"
			if st.FirstOffset > 0 {
				events, offsets = st.LastOffset-st.FirstOffset+1, fmt.Sprintf("%d-%d", st.FirstOffset, st.LastOffset)
			}
			res := "-"
			if st.Resource.Resource != "" {
				res = resourceString(st.Resource)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.File, res, st.Objects, events, offsets,
				formatSize(st.JournalBytes), formatSize(uint64(max(st.FileSize, 0))), formatRetention(r.ret), r.Via)
		}
		if len(rows) == 0 {
			fmt.Fprintf(tw, "(no journal files, *.db, in %s)\n", f.db)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d files in %s could not be read (a file a running cache holds is read through its inspect socket, FILE.sock; a writer that serves none must stop first)", failed, len(rows), f.db)
	}
	return nil
}

// resourceString is the resource of a file as journal.Resource.String
// names it.
func resourceString(r inspect.Resource) string {
	var jr journal.Resource
	jr.GVR.Group, jr.GVR.Version, jr.GVR.Resource = r.Group, r.Version, r.Resource
	jr.Namespace, jr.LabelSelector, jr.FieldSelector = r.Namespace, r.LabelSelector, r.FieldSelector
	return jr.String()
}

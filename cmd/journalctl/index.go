package main

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// indexPage is how many index entries one scan asks for.
const indexPage = 1000

type indexFlags struct {
	db, output, prefix string
}

func newIndexCmd() *cobra.Command {
	var f indexFlags
	cmd := &cobra.Command{
		Use:   "index --db FILE [PREFIX] [-o table|json]",
		Short: "Print the index: each object's key, UID and last resourceVersion",
		Long: "Print the index in key order: each object's key (<namespace>/<name>, or <name> when\n" +
			"cluster-scoped), UID and last resourceVersion. PREFIX keeps the keys that start with it.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				f.prefix = args[0]
			}
			return runIndex(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	addDBFlag(cmd, &f.db)
	addOutputFlag(cmd, &f.output)
	return cmd
}

// runIndex prints the index entries whose keys start with f.prefix.
func runIndex(ctx context.Context, out io.Writer, f indexFlags) error {
	p, err := newPrinter(out, f.output, "KEY", "UID", "RESOURCEVERSION")
	if err != nil {
		return err
	}
	src, err := openSource(ctx, f.db)
	if err != nil {
		return err
	}
	after := scanStart(f.prefix)
	for {
		es, err := src.ScanIndex(ctx, after, indexPage)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Key < f.prefix {
				continue
			}
			if !strings.HasPrefix(e.Key, f.prefix) {
				return p.flush()
			}
			if err := p.row(jsonIndexEntry(e), e.Key, e.UID, e.ResourceVersion); err != nil {
				return err
			}
		}
		if len(es) < indexPage {
			return p.flush()
		}
		after = es[len(es)-1].Key
	}
}

// scanStart returns the "after" key from which a scan (keys strictly after
// it) reaches every key starting with prefix, including prefix itself, and
// few others: the prefix with its last byte decremented and 0xff appended,
// or with a last byte 0x00 dropped. The keys that precede prefix are
// skipped by the caller.
func scanStart(prefix string) string {
	if prefix == "" {
		return ""
	}
	head, last := prefix[:len(prefix)-1], prefix[len(prefix)-1]
	if last == 0 {
		return head
	}
	return head + string([]byte{last - 1, 0xff})
}

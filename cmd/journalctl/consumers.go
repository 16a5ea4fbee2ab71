package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

type consumersFlags struct {
	db, output string
}

func newConsumersCmd() *cobra.Command {
	var f consumersFlags
	cmd := &cobra.Command{
		Use:   "consumers --db FILE [-o table|json]",
		Short: "Print the journal's consumers: committed offset and lag",
		Long: "Print the consumers registered in the journal, in name order: each one's committed offset\n" +
			"(0: none) and lag, the number of events after it up to the head. Consumers register\n" +
			"through the library (journal.Journal.Consumer); events --consumer NAME reads as one.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runConsumers(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	addDBFlag(cmd, &f.db)
	addOutputFlag(cmd, &f.output)
	return cmd
}

// runConsumers prints the consumers with their committed offsets and lag.
func runConsumers(ctx context.Context, out io.Writer, f consumersFlags) error {
	p, err := newPrinter(out, f.output, "NAME", "COMMITTED", "LAG")
	if err != nil {
		return err
	}
	src, err := openSource(ctx, f.db)
	if err != nil {
		return err
	}
	cs, err := src.Consumers(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := p.row(jsonConsumer(c), c.Name, c.Committed, c.Lag); err != nil {
			return err
		}
	}
	return p.flush()
}

package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal/inspect"
)

func newConsumersCmd() *cobra.Command {
	cmd := newFileCmd(&cobra.Command{
		Use:   "consumers --db FILE [-o table|json|yaml|name]",
		Short: "Print the journal's consumers: committed offset and lag",
		Long: "Print the consumers registered in the journal, in name order: each one's committed offset\n" +
			"(0: none) and lag, the number of events after it up to the head. consumers create, reset\n" +
			"and delete manage them (a program registers one with journal.Journal.Consumer); events\n" +
			"--consumer NAME reads as one.",
		Args: noArgsDB,
	}, listFormats, runConsumers)
	cmd.AddCommand(newConsumerCreateCmd(), newConsumerResetCmd(), newConsumerDeleteCmd())
	return cmd
}

// runConsumers prints the consumers with their committed offsets and lag.
func runConsumers(ctx context.Context, out io.Writer, f fileFlags) error {
	p := newSpecPrinter(out, printSpec{format: f.output, header: []string{"NAME", "COMMITTED", "LAG"}})
	src, err := openSource(ctx, f.db)
	if err != nil {
		return err
	}
	cs, err := src.Consumers(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := p.row(inspect.Consumer(c), c.Name, c.Committed, c.Lag); err != nil {
			return err
		}
	}
	return p.close()
}

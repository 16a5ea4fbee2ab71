package main

// consumers create, reset and delete: an SRE manages a durable consumer
// from the CLI. With no watch running the file is opened writable for the
// change alone; a running watch makes the change through its socket
// (POST /consumers/{name}/change, journal/inspect), as events --commit
// does.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// ChangeConsumer opens the file writable for the change alone, as Commit.
func (f fileSource) ChangeConsumer(_ context.Context, c inspect.ConsumerChange) (info journal.ConsumerInfo, err error) {
	err = f.update(func(j *journal.Journal) error { info, err = inspect.ChangeConsumer(j, c); return err })
	return info, err
}

func newConsumerCreateCmd() *cobra.Command {
	var db string
	var atHead bool
	var from uint64
	cmd := &cobra.Command{
		Use:   "create NAME --db FILE [--at-head | --from OFFSET]",
		Short: "Register a durable consumer",
		Long: "Register consumer NAME. It reads from the first retained event, or with --at-head only\n" +
			"the events journaled from now on, or with --from from OFFSET on. Registered consumers\n" +
			"hold retention back until the hard byte cap.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if atHead && cmd.Flags().Changed("from") {
				return errors.New("--at-head and --from exclude each other: give one position")
			}
			if cmd.Flags().Changed("from") && from == 0 {
				return errors.New("--from 0: want an offset of 1 or more")
			}
			c := inspect.ConsumerChange{Op: "create", Name: args[0], Offset: from, Head: atHead}
			return runConsumerChange(cmd.Context(), cmd.OutOrStdout(), db, c)
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&atHead, "at-head", false, "read only the events journaled from now on")
	cmd.Flags().Var(offsetValue{&from}, "from", "read from `OFFSET` on")
	return cmd
}

func newConsumerResetCmd() *cobra.Command {
	var db, toTime string
	var toHead bool
	var toOffset uint64
	cmd := &cobra.Command{
		Use:   "reset NAME --db FILE (--to-offset OFFSET | --to-time TIME | --to-head)",
		Short: "Move a consumer back or forward",
		Long: "Move consumer NAME so that it reads next from OFFSET, from the first event journaled at\n" +
			"or after TIME (RFC 3339, or a duration ago: 10m, 1d), or from the head (skip the\n" +
			"backlog). Its committed offset becomes one less: backwards too, on purpose.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			n := 0
			for _, name := range []string{"to-offset", "to-time", "to-head"} {
				if fl.Changed(name) {
					n++
				}
			}
			if n != 1 {
				return errors.New("give one of --to-offset, --to-time and --to-head")
			}
			if fl.Changed("to-offset") && toOffset == 0 {
				return errors.New("--to-offset 0: want an offset of 1 or more")
			}
			at, err := parseTimeFlag("to-time", toTime, time.Now())
			if err != nil {
				return err
			}
			c := inspect.ConsumerChange{Op: "reset", Name: args[0], Offset: toOffset, At: at, Head: toHead}
			return runConsumerChange(cmd.Context(), cmd.OutOrStdout(), db, c)
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().Var(offsetValue{&toOffset}, "to-offset", "read next from `OFFSET`")
	cmd.Flags().StringVar(&toTime, "to-time", "", "read next from the first event at or after `TIME`")
	cmd.Flags().BoolVar(&toHead, "to-head", false, "read next from the head: skip what is journaled")
	return cmd
}

func newConsumerDeleteCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "delete NAME --db FILE",
		Short: "Delete a consumer, and its hold on retention",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsumerChange(cmd.Context(), cmd.OutOrStdout(), db, inspect.ConsumerChange{Op: "delete", Name: args[0]})
		},
	}
	addDBFlag(cmd, &db)
	return cmd
}

// runConsumerChange makes c in the file db, or through the watch that
// holds it, and prints what it did.
func runConsumerChange(ctx context.Context, out io.Writer, db string, c inspect.ConsumerChange) error {
	src, err := openSource(ctx, db)
	if err != nil {
		return err
	}
	info, err := src.ChangeConsumer(ctx, c)
	if handover(err) { // a watch took the file, or stopped, meanwhile
		if src, err = openSource(ctx, db); err == nil {
			info, err = src.ChangeConsumer(ctx, c)
		}
	}
	if err != nil {
		return err
	}
	if c.Op == "delete" {
		fmt.Fprintf(out, "consumer %s deleted\n", c.Name)
		return nil
	}
	done := map[string]string{"create": "created", "reset": "reset"}[c.Op]
	fmt.Fprintf(out, "consumer %s %s: committed %d, reads from %d, lag %d\n", c.Name, done, info.Committed, info.Committed+1, info.Lag)
	return nil
}

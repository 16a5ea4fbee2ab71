package main

// The file check (journalctl check, journal.Journal.Check): offline, the
// whole file. Not the anti-entropy relist against the server, which is
// journalctl relist (relist.go). verify is an alias of it, so that scripts
// that call it by that name keep working; its messages say verify.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// errProblems is returned by check when the file has problems: exit
// status 3. Its text says verify, the alias, so that scripts matching it
// keep working.
var errProblems = errors.New("verify: problems found")

// newCheckCmd returns the check command; verify is its alias.
func newCheckCmd() *cobra.Command {
	return newFileCmd(&cobra.Command{
		Use:     "check --db FILE [-o table|json]",
		Aliases: []string{"verify"},
		Short:   "Check the whole file offline: records, offsets, sizes, the index, and the journal's replay against it",
		Long: "Read the whole file in one read-only transaction (journal.Journal.Check): every record\n" +
			"decodes and passes its checksum, offsets are contiguous, sizes and counts match the\n" +
			"file's metadata, every index entry decodes and, when the journal still starts at offset\n" +
			"1, replaying it ends in exactly the index. It prints what it read and each problem on\n" +
			"its own line. Exit status 0 for a sound file, 3 when it found problems, 2 when the file\n" +
			"cannot be read at all. It needs the file to itself: while a watch runs it fails with\n" +
			"exit status 2; journalctl relist checks the index against the server instead.\n" +
			"verify, its former name, is an alias.",
		Args: cobra.NoArgs,
	}, tableOrJSON, runCheck)
}

// runCheck checks f.db and prints the report. It returns an error
// matching errProblems when the report lists problems.
func runCheck(ctx context.Context, out io.Writer, f fileFlags) error {
	r, sealed, err := checkFile(ctx, f.db)
	if err != nil {
		return err
	}
	if f.output == "json" {
		jr := jsonCheckReport{Events: r.Events, Objects: r.Objects, Replayed: r.Replayed, OK: r.OK(),
			Problems: append([]string{}, r.Problems...), SealedKeys: sealed}
		if err := json.NewEncoder(out).Encode(jr); err != nil {
			return err
		}
	} else if err := printCheckReport(out, r, sealed); err != nil {
		return err
	}
	if !r.OK() {
		return fmt.Errorf("%w in %s (%d)", errProblems, f.db, len(r.Problems))
	}
	return nil
}

// checkFile opens path read-only for one Check: briefly, as the other
// read-only commands, so that a watch can start once it is done. A file
// that a writer holds is an error matching journal.ErrLocked that says
// what to do instead. sealed counts the sealed objects per key ID
// (journal.Settings.SealKeyUse): what a key rotation waits for.
func checkFile(ctx context.Context, path string) (r journal.CheckReport, sealed map[string]uint64, err error) {
	err = fileSource{path: path}.view(func(j *journal.Journal) error {
		if r, err = j.Check(); err != nil {
			return fmt.Errorf("verify: %w", err) // the store's errors name the file
		}
		if sealed, err = j.Settings().SealKeyUse(); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("sealed objects: %v", err))
		}
		return nil
	})
	if errors.Is(err, journal.ErrLocked) {
		sock := inspect.SocketPath(path)
		if _, serr := inspect.NewClient(sock).Head(ctx); serr == nil {
			return r, nil, fmt.Errorf("%w: a watch is running on it (%s): stop the watch to verify the file; "+
				"use `journalctl relist` to check the index against the server", err, sock)
		}
		return r, nil, fmt.Errorf("%w: stop the process that writes it to verify the file", err)
	}
	return r, sealed, err
}

// printCheckReport prints r as a table (with a sealed row, the objects
// per sealing key ID, when the file holds sealed objects), then each
// problem on a line of its own.
func printCheckReport(out io.Writer, r journal.CheckReport, sealed map[string]uint64) error {
	replayed := "yes"
	if !r.Replayed {
		replayed = "no (the journal is trimmed or damaged: its replay was not compared with the index)"
	}
	problems := "none"
	if !r.OK() {
		problems = fmt.Sprint(len(r.Problems))
	}
	tw := newTable(out)
	fmt.Fprintf(tw, "events\t%d\n", r.Events)
	fmt.Fprintf(tw, "objects\t%d\n", r.Objects)
	fmt.Fprintf(tw, "replayed\t%s\n", replayed)
	fmt.Fprintf(tw, "problems\t%s\n", problems)
	if len(sealed) > 0 {
		var parts []string
		for _, id := range slices.Sorted(maps.Keys(sealed)) {
			parts = append(parts, fmt.Sprintf("key %s: %d", id, sealed[id]))
		}
		fmt.Fprintf(tw, "sealed\t%s\n", strings.Join(parts, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range r.Problems {
		if _, err := fmt.Fprintf(out, "  %s\n", p); err != nil {
			return err
		}
	}
	return nil
}

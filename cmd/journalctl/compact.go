package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/compactor"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

type compactFlags struct {
	db         string
	keepBackup bool
}

func newCompactCmd() *cobra.Command {
	var f compactFlags
	cmd := &cobra.Command{
		Use:   "compact --db FILE [--keep-backup]",
		Short: "Rewrite the journal file to give the space retention trimmed back to the filesystem",
		Long: "Rewrite FILE into FILE.compact, then rename it over FILE: bbolt never shrinks a file, so\n" +
			"pages that retention trimming freed are only reused, not returned. The rewrite keeps\n" +
			"every event and object (it is not etcd's compaction, and trims nothing). With\n" +
			"--keep-backup the old file stays as FILE.bak. It needs the file to itself: it fails with\n" +
			"exit status 2 while a watch runs, and a watch started meanwhile fails to open the file.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCompact(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	addDBFlag(cmd, &f.db)
	cmd.Flags().BoolVar(&f.keepBackup, "keep-backup", false, "keep the old file as FILE.bak")
	return cmd
}

// runCompact rewrites f.db compacted and renames the result over it.
func runCompact(ctx context.Context, out io.Writer, f compactFlags) error {
	// The rewrite holds the writer's lock through the copy and the rename
	// (compactor.Rewrite), which keeps every writer out, a running one
	// included in the moment it reopens its file (journal/bolt/refresh.go).
	// The shared lock of this read-only open keeps out what does not know
	// the writer's lock; the rewrite's own read-only opens share it.
	j, err := journal.Open(f.db, &journal.Options{ReadOnly: true, Timeout: -1})
	if errors.Is(err, journal.ErrLocked) {
		if _, serr := inspect.NewClient(inspect.SocketPath(f.db)).Head(ctx); serr == nil {
			return fmt.Errorf("%w: a watch is running on it (%s); stop it to rewrite the file", err, inspect.SocketPath(f.db))
		}
		return fmt.Errorf("%w: stop the process that writes it to rewrite the file", err)
	}
	if err != nil {
		return err
	}
	defer j.Close()

	before, after, err := compactor.Rewrite(f.db, &compactor.RewriteOptions{KeepBackup: f.keepBackup})
	if errors.Is(err, journal.ErrLocked) {
		return fmt.Errorf("%w: stop the process that writes it to rewrite the file", err)
	}
	if err != nil {
		return asFileError(err)
	}
	fmt.Fprintf(out, "rewrote %s: %d bytes -> %d bytes (%s)\n", f.db, before, after, shrinkage(before, after))
	return nil
}

// asFileError marks err as an error of the file system (a read-only file
// system, no space, no permission: an *os.PathError, *os.LinkError or
// *os.SyscallError) so that it exits with status 2, as the help says.
func asFileError(err error) error {
	if errors.As(err, new(*os.PathError)) || errors.As(err, new(*os.LinkError)) ||
		errors.As(err, new(*os.SyscallError)) || errors.Is(err, syscall.EROFS) {
		return fileError{err}
	}
	return err
}

// shrinkage describes the change from before to after bytes: "93% smaller".
func shrinkage(before, after int64) string {
	switch {
	case before <= 0:
		return "0% smaller"
	case after > before:
		return fmt.Sprintf("%d%% larger", (after-before)*100/before)
	}
	return fmt.Sprintf("%d%% smaller", (before-after)*100/before)
}

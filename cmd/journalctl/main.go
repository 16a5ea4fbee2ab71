// Command journalctl journals Kubernetes resources' watch events into
// watchjournal files, one file per resource, and reads such files. It is a
// thin shell over packages journal and reconcile.
//
//	journalctl watch RESOURCE[,RESOURCE...] (--db FILE | --dir DIR) [-n NS | -A] [-l SELECTOR] [flags]
//	journalctl events    --db FILE [--from OFFSET | --consumer NAME [--commit]] [-f] [-n N] [-r] [filters] [-o FORMAT]
//	journalctl index     --db FILE [KEY [--prefix]] [-n NS] [-o table|json|yaml|name]
//	journalctl stats     --db FILE|DIR [-o table|json]
//	journalctl consumers --db FILE [-o table|json|yaml|name]
//	journalctl consumers create|reset|delete NAME --db FILE [position flags]
//	journalctl completion bash|zsh|fish|powershell
//	journalctl compact   --db FILE [--keep-backup]
//	journalctl check     --db FILE [-o table|json]
//	journalctl relist    --db FILE
//	journalctl version
//
// Each command's --help says what it does and what its flags mean;
// journalctl --help lists the exit statuses (messages.go, rootHelp;
// exitCode below). Where to find the rest:
//
//   - watch (watch.go): resolving RESOURCE through discovery, retried
//     while the apiserver is unreachable (resolve.go); one file per
//     resource with --dir (reconcile.Group); sealing (seal.go); a shard
//     group member (shard.go); the list's progress (progress.go).
//   - Logging (logging.go): zap on stderr; the library's logr and
//     client-go's klog lines go through the same core.
//   - Reading while a watch runs (source.go; serveFile in watch.go): a
//     watch holds bbolt's exclusive lock, so it serves reads on the unix
//     socket FILE.sock (journal/inspect); the read-only commands open the
//     file read-only, briefly, and ask the socket when a writer holds it.
//   - Following and committing (events.go): events -f long-polls a
//     watch's socket, or reopens the file every second without one, and
//     moves between the two when a watch starts or stops; --commit
//     commits only the rows that reached the output whole.
//   - check (alias verify) is the offline file check
//     (journal.Journal.Check); relist asks a running watch for the
//     anti-entropy relist (reconcile.Loop.Verify); compact rewrites the
//     file offline to give freed pages back to the filesystem.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal"
)

func main() {
	// A write to a pipe whose reader went away (events | head) fails with
	// EPIPE instead of killing the process with SIGPIPE (exit 141): run
	// then exits 0, quietly. It also keeps a watch alive whose log reader
	// went away, as systemd's IgnoreSIGPIPE=yes does for services.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second signal kills the process
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit status. Errors are
// printed as one line on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, defaultSettings(), args, stdout, stderr)
}

// runWith is run with the invocation's settings conf (settings.go).
func runWith(ctx context.Context, conf settings, args []string, stdout, stderr io.Writer) int {
	installKlog()
	root := &cobra.Command{
		Use:           "journalctl",
		Short:         "Journal a Kubernetes resource's watch events, and read the journal",
		Long:          rootHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newWatchCmd(&conf), newEventsCmd(&conf), newIndexCmd(), newStatsCmd(), newConsumersCmd(), newCompactCmd(),
		newCheckCmd(), newRelistCmd(&conf), newVersionCmd())
	addCompletions(root)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil || errors.Is(err, syscall.EPIPE) && outputGone(stdout) {
		return 0 // the output's reader went away: it has what it wanted (events | head)
	}
	fmt.Fprintf(stderr, "journalctl: %v\n", err)
	return exitCode(err)
}

// fileErrors are the errors that make the exit status 2.
var fileErrors = []error{
	journal.ErrNotExist, journal.ErrLocked, journal.ErrCorrupt, journal.ErrForeign,
	journal.ErrNewerSchema, journal.ErrResourceMismatch, journal.ErrBadRecord,
	errNoWatch, errWatchRunning,
}

// fileError marks an error opening the journal file (a missing directory,
// a directory in its place, no permission) as one of exit status 2,
// without changing its message.
type fileError struct{ err error }

func (e fileError) Error() string { return e.err.Error() }
func (e fileError) Unwrap() error { return e.err }

// exitCode returns the exit status for err: 3 for errProblems (check),
// 2 for fileErrors and a fileError, else 1.
func exitCode(err error) int {
	if errors.Is(err, errProblems) {
		return 3
	}
	if errors.As(err, new(fileError)) {
		return 2
	}
	for _, target := range fileErrors {
		if errors.Is(err, target) {
			return 2
		}
	}
	return 1
}

// fileFlags are the flags of a command that reads one file and prints
// what it found: --db and -o.
type fileFlags struct {
	db, output string
}

// newFileCmd adds --db and -o, one of formats, to cmd and makes it run run
// with them once -o is known good.
func newFileCmd(cmd *cobra.Command, formats []string, run func(context.Context, io.Writer, fileFlags) error) *cobra.Command {
	var f fileFlags
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFormat(f.output, formats...); err != nil {
			return err
		}
		return run(cmd.Context(), cmd.OutOrStdout(), f)
	}
	addDBFlag(cmd, &f.db)
	addOutputFlag(cmd, &f.output, formats)
	return cmd
}

// addDBFlag adds the required --db flag.
func addDBFlag(cmd *cobra.Command, db *string) {
	cmd.Flags().StringVar(db, "db", "", "journal `FILE` (required)")
	_ = cmd.MarkFlagRequired("db")
}

// addOutputFlag adds -o/--output, which takes one of formats.
func addOutputFlag(cmd *cobra.Command, output *string, formats []string) {
	cmd.Flags().StringVarP(output, "output", "o", "table", "output format: "+orList(formats))
}

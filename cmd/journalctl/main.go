// Command journalctl journals Kubernetes resources' watch events into
// watchjournal files, one file per resource, and reads such files. It is a
// thin shell over packages journal and reconcile.
//
//	journalctl watch RESOURCE[,RESOURCE...] (--db FILE | --dir DIR) [-n NS | -A] [-l SELECTOR] [--field-selector S]
//	                 [--kubeconfig PATH] [--context NAME] [--page-size N] [--metadata-only]
//	                 [--log-level LEVEL] [-v N] [--retain-events N] [--retain-bytes SIZE]
//	                 [--retain-age DURATION] [--retain-hard-bytes SIZE]
//	                 [--verify-interval DURATION] [--idle-timeout DURATION]
//	                 [--request-timeout DURATION] [--secret-payloads --seal-key-file FILE]
//	                 [--seal-resource RESOURCE[.GROUP]]
//	                 [--qps N] [--burst N]
//	journalctl events    --db FILE [--from OFFSET | --consumer NAME [--commit]] [-f] [-n N] [-r]
//	                     [--since T] [--until T] [--key K] [--namespace NS] [--type T] [--origin O]
//	                     [-o table|wide|json|yaml|name] [--show-managed-fields] [--seal-key-file FILE]
//	journalctl index     --db FILE [KEY [--prefix]] [-n NS] [-o table|json|yaml|name]
//	journalctl stats     --db FILE [-o table|json]
//	journalctl consumers --db FILE [-o table|json|yaml|name]
//	journalctl consumers create|reset|delete NAME --db FILE [position flags]
//	journalctl completion bash|zsh|fish|powershell
//	journalctl compact   --db FILE [--keep-backup]
//	journalctl check     --db FILE [-o table|json]
//	journalctl relist    --db FILE
//	journalctl version
//
// watch resolves RESOURCE as kubectl does (configmaps, cm, configmap,
// deployments.apps, deployments.v1.apps, a CRD's plural) through
// discovery, and also as resource.version for the core group
// (configmaps.v1, the form the CLI prints), then lists and watches it into
// FILE until SIGINT or SIGTERM. Several resources, comma-separated
// (configmaps,secrets), take --dir DIR instead: one process journals each
// into a file of its own, DIR/<resource>.<version>[.<group>].db
// (configmaps.v1.db, deployments.v1.apps.db: reconcile.FileName), each with
// its own socket, all under one reconcile.Group; the other commands read
// one such file with --db. A name the apiserver does not serve is an
// error that suggests a served name within two edits ("did you mean
// configmaps?"). While the apiserver is unreachable or answers 5xx or 429,
// watch retries discovery with capped, jittered backoff (200ms doubling to
// 30s), logging each distinct error once, until it succeeds or SIGINT or
// SIGTERM (exit status 0); 401, 403 and a refused certificate end it at
// once. The file records its resource: a watch of another resource into it
// fails. A Secret's data never reaches the file without --secret-payloads:
// Secrets keep metadata only. With it, the data is stored sealed
// (AES-256-GCM, journal/seal.go) under the first key of --seal-key-file,
// which it requires; --seal-resource seals other resources' objects too,
// and events --seal-key-file opens them. The other flags are described by
// journalctl watch --help; the defaults of --qps and --burst are package
// internal/clientrate's, which make bench uses too.
//
// watch logs through zap on stderr: ISO 8601 times, durations as Go
// writes them ("110ms"). The library logs through logr, backed by the same
// zap core (go-logr/zapr): logr's V(n) is zap's level -n, so -v N shows
// the library's lines up to V(N) (V(1): repeats of a failure), and
// --log-level debug equals -v 1. client-go's own klog lines land in the
// same log, named client-go: its errors at V(1) (watch logs each failure
// that matters once itself), its V(N) lines from -v N. The apiserver's
// warnings are logged once each.
//
// version prints the module version from the build info ("devel" when it
// records none) and the Go version.
//
// # Reading while a watch runs
//
// A watch holds bbolt's exclusive file lock, which keeps every other
// process from opening the file, even read-only. So it serves reads as JSON
// over HTTP on the unix socket FILE.sock (journal/inspect, server.go). The read-only
// commands first open the file read-only, briefly (open, read, close: a
// shared lock held longer would keep a watch from starting), and when a
// writer holds it they ask its socket instead.
//
// # Consumers and retention
//
// Consumers register through the library (journal.Journal.Consumer) or
// consumers create; consumers reset moves one, consumers delete removes
// it (consumers_change.go); consumers lists them with their lag, and events --consumer NAME reads
// from the offset after NAME's committed one. A position that retention
// has passed is an error (journal.TrimmedError), never a silent skip.
// events --commit moves the committed offset to the last event printed:
// with no watch running it opens the file writable for the commit alone,
// else the watch commits it (POST on its socket).
//
// watch --retain-* records a journal.Retention in the file and enforces it
// with a compactor.Compactor beside the reconcile loop; without those flags
// it enforces the retention the file records. stats shows it. Retention
// frees pages inside the file; compact rewrites the file offline
// (compactor.CompactFile) to give them back to the filesystem, and needs
// the file to itself.
//
// # Following
//
// events -f prints new events as they are journaled, until SIGINT. Its
// table columns have minimum widths (TYPE fits MODIFIED, ORIGIN restart,
// UID a UUID) and widen, for good, only for a wider cell, so later pages
// line up with the first. Through
// a watch's socket it long-polls. Without a writer it reopens the file once
// a second: bbolt has no cross-process notification. When a watch starts or
// stops while it follows, it moves to the socket or back to the file.
//
// # Checking the file and the index
//
// check (alias verify, its former name) is the offline file check
// (journal.Journal.Check, check.go); relist asks a running watch for the
// anti-entropy relist (reconcile.Loop.Verify, relist.go). Their --help
// says what each reads and prints. stats shows a watch's counters: lists,
// watches, 410s, idle restarts, verifies, divergences.
//
// # Exit status
//
// (Listed by --help too.) 0 on success and after SIGINT or SIGTERM, and
// when the output's reader went away (events | head, events -f | head:
// SIGPIPE is ignored, and a write that fails with EPIPE on a stdout whose
// reader is gone ends the command quietly); 3 when check found problems
// (it prints them); 2 when the file cannot be opened or read as this
// resource's journal (missing, in a missing directory, a directory,
// locked with no watch serving it, corrupt, not a watchjournal file,
// written by a newer watchjournal, or recording another resource), for a
// watch of a file another watch is writing (it names that watch's pid),
// for compact and check while a watch runs, and for relist with no watch
// running, and for a file-system error of compact (a read-only file
// system, no space, no permission); 1 for usage and all other errors, an unknown resource, a
// discovery error retrying cannot fix and an offset retention trimmed among them,
// and a relist that did not complete in time.
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
	installKlog()
	root := &cobra.Command{
		Use:           "journalctl",
		Short:         "Journal a Kubernetes resource's watch events, and read the journal",
		Long:          rootHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newWatchCmd(), newEventsCmd(), newIndexCmd(), newStatsCmd(), newConsumersCmd(), newCompactCmd(),
		newCheckCmd(), newRelistCmd(), newVersionCmd())
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

// addDBFlag adds the required --db flag.
func addDBFlag(cmd *cobra.Command, db *string) {
	cmd.Flags().StringVar(db, "db", "", "journal `FILE` (required)")
	_ = cmd.MarkFlagRequired("db")
}

// addOutputFlag adds -o/--output.
func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "table", "output format: table or json")
}

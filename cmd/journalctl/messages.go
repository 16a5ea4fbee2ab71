package main

// Messages: what the CLI says about arguments and flags it cannot take,
// and what its exit statuses mean.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal"
)

// rootHelp is journalctl --help's text above the commands: what the
// exit statuses mean (exitCode).
const rootHelp = "Journal a Kubernetes resource's watch events, and read the journal.\n\n" +
	"Exit status:\n" +
	"  0  success; after SIGINT or SIGTERM; when the output's reader went away (events | head,\n" +
	"     events -f | head)\n" +
	"  1  usage and other errors: an unknown resource, an offset trimmed by retention or past\n" +
	"     the head, a key not in the index, a relist that did not complete in time\n" +
	"  2  the journal file cannot be opened, read or written: missing, a directory, no\n" +
	"     permission, a read-only file system, locked with no watch serving it, corrupt, not a\n" +
	"     watchjournal file, newer, or recording another resource; a watch of a file another\n" +
	"     watch writes; compact and check while a watch runs; relist with no watch running\n" +
	"  3  verify found problems (it prints them)"

// resourceArg is watch's argument check: exactly one RESOURCE.
func resourceArg(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return errors.New("watch needs the RESOURCE to journal, e.g. journalctl watch configmaps --db FILE")
	case len(args) > 1:
		return fmt.Errorf("watch takes one RESOURCE, got %d: %s", len(args), strings.Join(args, " "))
	}
	return nil
}

// daysValue is a duration flag that also takes whole days: 1d, 7d, 1d12h.
type daysValue struct{ d *time.Duration }

func (v daysValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0" // pflag prints no default for "0"
	}
	return v.d.String()
}

func (v daysValue) Set(s string) error {
	d, err := parseDays(s)
	if err != nil {
		return errors.New("want a duration such as 90m, 24h, 7d or 1d12h")
	}
	*v.d = d
	return nil
}

func (daysValue) Type() string { return "DURATION" }

// resourceText is the resource as stats shows it: its String, and
// "(all namespaces)" for a namespaced resource watched with -A. A
// resource with no namespace whose index holds cluster-scoped keys (no
// "/") is cluster-scoped: it gets nothing.
func resourceText(ctx context.Context, src source, r journal.Resource) string {
	s := r.String()
	if r.Namespace != "" {
		return s
	}
	es, err := src.ScanIndex(ctx, "", 1)
	if err == nil && len(es) == 1 && !strings.Contains(es[0].Key, "/") {
		return s
	}
	return s + " (all namespaces)"
}

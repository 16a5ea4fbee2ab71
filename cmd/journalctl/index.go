package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"

	"github.com/spf13/cobra"
)

// indexPage is how many index entries one scan asks for.
const indexPage = 1000

type indexFlags struct {
	db, output, key, namespace string
	// prefix makes key a prefix: every key that starts with it.
	prefix bool
}

func newIndexCmd() *cobra.Command {
	var f indexFlags
	cmd := &cobra.Command{
		Use:   "index --db FILE [KEY [--prefix]] [-n NS] [-o table|json|yaml|name]",
		Short: "Print the index: each object's key, UID and last resourceVersion",
		Long: "Print the index in key order: each object's key (<namespace>/<name>, or <name> when\n" +
			"cluster-scoped), UID and last resourceVersion. KEY prints that object alone, and is an\n" +
			"error when the index does not hold it (deleted, or never seen): wj/cm1 never matches\n" +
			"wj/cm10. With --prefix the argument is a prefix: every key that starts with it. -n NS\n" +
			"keeps namespace NS's objects; a KEY is then a name in it. -o json prints one JSON\n" +
			"array (one object for a KEY).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				f.key = args[0]
			}
			if f.prefix && len(args) == 0 {
				return errors.New("--prefix needs the PREFIX argument")
			}
			return runIndex(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	addDBFlag(cmd, &f.db)
	fl := cmd.Flags()
	addOutputFlag(cmd, &f.output, listFormats)
	fl.BoolVar(&f.prefix, "prefix", false, "match every key that starts with the argument")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "keep the objects of namespace `NS`")
	return cmd
}

// runIndex prints the index entry of key f.key, or with f.prefix (or no
// key) the entries whose keys start with it, within f.namespace.
func runIndex(ctx context.Context, out io.Writer, f indexFlags) error {
	if err := checkFormat(f.output, listFormats...); err != nil {
		return err
	}
	key := f.key
	if f.namespace != "" {
		key = f.namespace + "/" + key
	}
	exact := f.key != "" && !f.prefix
	spec := printSpec{format: f.output, header: []string{"KEY", "UID", "RESOURCEVERSION"}}
	src, err := openSource(ctx, f.db)
	if err != nil {
		return err
	}
	if exact {
		es, err := src.ScanIndex(ctx, scanStart(key), 16)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(es, func(e journal.IndexEntry) bool { return e.Key >= key })
		if i < 0 || es[i].Key != key {
			return fmt.Errorf("%q: %w (deleted, or never seen); --prefix matches the keys that start with it", key, errNotFound)
		}
		e := inspect.IndexEntry(es[i])
		switch f.output {
		case "json":
			return json.NewEncoder(out).Encode(e)
		case "yaml":
			b, err := yaml.Marshal(e)
			if err != nil {
				return err
			}
			_, err = out.Write(b)
			return err
		}
		p := newSpecPrinter(out, spec)
		if err := p.row(e, e.Key, e.UID, e.ResourceVersion); err != nil {
			return err
		}
		return p.close()
	}
	p := newSpecPrinter(out, spec)
	after := scanStart(key)
	for {
		es, err := src.ScanIndex(ctx, after, indexPage)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Key < key {
				continue
			}
			if !strings.HasPrefix(e.Key, key) {
				return p.close()
			}
			if err := p.row(inspect.IndexEntry(e), e.Key, e.UID, e.ResourceVersion); err != nil {
				return err
			}
		}
		if len(es) < indexPage {
			return p.close()
		}
		after = es[len(es)-1].Key
	}
}

// errNotFound is returned for a key the index does not hold.
var errNotFound = errors.New("not in the index")

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

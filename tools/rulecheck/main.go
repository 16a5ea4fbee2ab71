// Command rulecheck checks Prometheus rule files as `promtool check rules`
// does, with Prometheus's own rule parser (model/rulefmt: the YAML, every
// PromQL expression, the annotations' templates, the names) and
// promtool's duplicate-rule lint, without building all of promtool.
//
// Usage: rulecheck FILE...; exit status 1 when a file has an error or a
// duplicate rule (promtool's --lint-fatal).
package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rulecheck FILE...")
		os.Exit(2)
	}
	p := parser.NewParser(parser.Options{})
	logger := slog.New(slog.DiscardHandler)
	failed := false
	for _, f := range os.Args[1:] {
		rgs, errs := rulefmt.ParseFile(f, false, model.UTF8Validation, p, logger)
		if len(errs) == 0 {
			errs = duplicates(rgs)
		}
		if len(errs) > 0 {
			failed = true
			fmt.Fprintf(os.Stderr, "%s: FAILED:\n", f)
			for _, e := range errs {
				fmt.Fprintln(os.Stderr, "  "+e.Error())
			}
			continue
		}
		n := 0
		for _, g := range rgs.Groups {
			n += len(g.Rules)
		}
		fmt.Printf("%s: SUCCESS: %d rules found\n", f, n)
	}
	if failed {
		os.Exit(1)
	}
}

// duplicates is promtool's duplicate-rules lint: two rules of one name
// (alert or record) with the same labels, group labels included.
func duplicates(rgs *rulefmt.RuleGroups) []error {
	type rule struct {
		name   string
		labels labels.Labels
	}
	var all []rule
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			all = append(all, rule{name: r.Alert + r.Record, labels: rules.FromMaps(g.Labels, r.Labels)})
		}
	}
	cmp := func(a, b rule) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return labels.Compare(a.labels, b.labels)
	}
	slices.SortFunc(all, cmp)
	var errs []error
	for i := 1; i < len(all); i++ {
		if cmp(all[i-1], all[i]) == 0 && (i < 2 || cmp(all[i-2], all[i]) != 0) {
			errs = append(errs, fmt.Errorf("duplicate rule %s with labels %s", all[i].name, all[i].labels))
		}
	}
	return errs
}

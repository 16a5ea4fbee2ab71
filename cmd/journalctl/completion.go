package main

// Shell completion: cobra's completion command (bash, zsh, fish,
// powershell) completes commands and flags; consumer names come from the
// journal file that --db names, read as the read-only commands read it.
// RESOURCE for watch comes from discovery of the apiserver the
// --kubeconfig and --context given so far name, bounded by
// completionTimeout; on any error it completes nothing rather than hang.

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// completionTimeout bounds the discovery request of watch's RESOURCE
// completion, so a shell never waits longer on an unreachable apiserver.
const completionTimeout = 2 * time.Second

// completeConsumers completes a consumer name from the file --db names.
func completeConsumers(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	var names []string
	if db, _ := cmd.Flags().GetString("db"); db != "" {
		if src, err := openSource(cmd.Context(), db); err == nil {
			if cs, err := src.Consumers(cmd.Context()); err == nil {
				for _, c := range cs {
					names = append(names, c.Name)
				}
			}
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeConsumerArg completes the NAME argument of consumers reset and
// delete: one name.
func completeConsumerArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completeConsumers(cmd, args, toComplete)
}

// completeWatchResource completes watch's RESOURCE argument: the
// resources the apiserver serves that support list and watch, by plural
// (configmaps) in the core group and plural.group (deployments.apps)
// elsewhere, in their preferred versions, sorted. It completes one
// argument and nothing on any error or after completionTimeout.
func completeWatchResource(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var f watchFlags
	f.kubeconfig, _ = cmd.Flags().GetString("kubeconfig")
	f.context, _ = cmd.Flags().GetString("context")
	f.qps = -1
	cfg, _, err := clientConfig(f)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cfg.Timeout = completionTimeout
	dc, err := newDiscovery(cfg) // the client watch resolves its argument with
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	// cfg.Timeout bounds each request; ctx bounds them all. Partial lists
	// on a partial failure.
	lists, _ := dc.ServerPreferredResourcesWithContext(ctx)
	if ctx.Err() != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return watchableNames(lists, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// watchableNames returns the names of lists' resources that support list
// and watch and start with prefix: plural, with .group outside the core
// group; subresources excluded; sorted and without duplicates.
func watchableNames(lists []*metav1.APIResourceList, prefix string) []string {
	var names []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			name := r.Name
			if gv.Group != "" {
				name += "." + gv.Group
			}
			if strings.HasPrefix(name, prefix) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// addCompletions registers the completions of root's commands' flags and
// arguments.
func addCompletions(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "events":
			_ = c.RegisterFlagCompletionFunc("consumer", completeConsumers)
			_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(eventsFormats, cobra.ShellCompDirectiveNoFileComp))
			_ = c.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(typeValues, cobra.ShellCompDirectiveNoFileComp))
			_ = c.RegisterFlagCompletionFunc("origin", cobra.FixedCompletions(originValues, cobra.ShellCompDirectiveNoFileComp))
			_ = c.RegisterFlagCompletionFunc("reason", cobra.FixedCompletions(reasonValues, cobra.ShellCompDirectiveNoFileComp))
		case "watch":
			c.ValidArgsFunction = completeWatchResource
		case "consumers":
			for _, sub := range c.Commands() {
				if sub.Name() == "reset" || sub.Name() == "delete" {
					sub.ValidArgsFunction = completeConsumerArg
				}
			}
		}
	}
}

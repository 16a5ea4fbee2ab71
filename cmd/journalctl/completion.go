package main

// Shell completion: cobra's completion command (bash, zsh, fish,
// powershell) completes commands and flags; consumer names come from the
// journal file that --db names, read as the read-only commands read it.
// RESOURCE for watch is not completed: that needs a discovery request.

import (
	"github.com/spf13/cobra"
)

// completeConsumers completes a consumer name from the file --db names.
func completeConsumers(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	db, err := cmd.Flags().GetString("db")
	if err != nil || db == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	src, err := openSource(cmd.Context(), db)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cs, err := src.Consumers(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
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

// addCompletions registers the completions of root's commands' flags and
// arguments.
func addCompletions(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "events":
			_ = c.RegisterFlagCompletionFunc("consumer", completeConsumers)
			_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(eventsFormats, cobra.ShellCompDirectiveNoFileComp))
			_ = c.RegisterFlagCompletionFunc("type", cobra.FixedCompletions([]string{"ADDED", "MODIFIED", "DELETED"}, cobra.ShellCompDirectiveNoFileComp))
			_ = c.RegisterFlagCompletionFunc("origin", cobra.FixedCompletions([]string{"watch", "relist", "restart"}, cobra.ShellCompDirectiveNoFileComp))
		case "consumers":
			for _, sub := range c.Commands() {
				if sub.Name() == "reset" || sub.Name() == "delete" {
					sub.ValidArgsFunction = completeConsumerArg
				}
			}
		}
	}
}

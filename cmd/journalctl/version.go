package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print journalctl's module version and the Go version that built it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "journalctl %s %s\n", moduleVersion(), runtime.Version())
			return err
		},
	}
}

// moduleVersion returns the main module's version from the build info
// (v1.2.0 from go install ...@v1.2.0, a pseudo-version from a tagged
// checkout), or "devel" when the build records none.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "devel"
	}
	return bi.Main.Version
}

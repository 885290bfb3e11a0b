package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/budgetguard/budgetguard/internal/version"
)

// NewVersionCommand returns the "version" command, in place of the stock
// one (which prints the descheduler's own version fields, empty in a
// binary that embeds it): it prints the line --version prints.
func NewVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print budgetguard's version and the Kubernetes and descheduler versions it embeds",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), version.Get())
			return err
		},
	}
}

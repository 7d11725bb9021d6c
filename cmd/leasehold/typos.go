package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// refuseTypos makes a mistyped subcommand or flag anywhere in the tree an
// error with the nearest suggestion and a non-zero exit. By default cobra
// prints a group command's help and exits 0 for an unknown subcommand
// ("leasehold migrate upp"), so a deploy script would skip its migrations
// without noticing.
func refuseTypos(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.SuggestionsMinimumDistance = 2
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) == 0 {
					return cmd.Help()
				}
				return unknownSubcommand(cmd, args[0])
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownSubcommand is the error for name under group cmd.
func unknownSubcommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	} else {
		msg += fmt.Sprintf("; see %q", cmd.CommandPath()+" --help")
	}
	return fmt.Errorf("%s", msg)
}

// flagError adds the nearest known flag to cobra's unknown-flag error.
func flagError(cmd *cobra.Command, err error) error {
	const prefix = "unknown flag: --"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return err
	}
	name := strings.TrimPrefix(msg, prefix)
	best, bestDist := "", 3 // suggest only close names
	visit := func(f *pflag.Flag) {
		if d := levenshtein(name, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if best == "" {
		return fmt.Errorf("%s; see %q", msg, cmd.CommandPath()+" --help")
	}
	return fmt.Errorf("%s; did you mean --%s?", msg, best)
}

// levenshtein is the edit distance between a and b.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

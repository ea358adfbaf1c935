package main

import (
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/qinglong/ql3/refuse"
)

// usage is the one constructor of a USAGE error: unknown commands and flags, wrong argument
// counts, flag values the parser rejects. report prints it as `ql3: usage: USAGE: ...`, exit 2.
func usage(format string, args ...any) *refuse.Error {
	return refuse.New(CodeUsage, format, args...)
}

// group makes every command that has subcommands (the root included) refuse to run without a
// known one: cobra would print the help and exit 0 for `ql3 store verfy`.
func group(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.SuggestionsMinimumDistance = 2
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error { return unknownCommand(cmd, args) }
	}
	for _, sub := range c.Commands() {
		group(sub)
	}
}

// unknownCommand refuses a group run with no subcommand or an unknown one, naming the nearest
// subcommands or, failing that, all of them.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usage("%s needs a command", c.CommandPath()).WithHint("one of: %s", strings.Join(subcommands(c), ", "))
	}
	e := usage("unknown command %s for %s", refuse.Ident(args[0]), c.CommandPath())
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		return e.WithHint("did you mean %s %s?", c.CommandPath(), strings.Join(s, " or "))
	}
	return e.WithHint("one of: %s", strings.Join(subcommands(c), ", "))
}

func subcommands(c *cobra.Command) []string {
	var names []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return names
}

// wrapArgs turns positional-argument errors of c and its subcommands into usage errors.
func wrapArgs(c *cobra.Command) {
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				if strings.Contains(err.Error(), cmd.CommandPath()) {
					return usage("%v", err)
				}
				return usage("%s: %v", cmd.CommandPath(), err)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// flagUsage turns a flag parser error into a usage error; an unknown flag gets the nearest flags
// of the command as a "did you mean".
func flagUsage(c *cobra.Command, err error) error {
	msg := err.Error()
	e := usage("%s: %s", c.CommandPath(), msg)
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return e
	}
	if near := nearFlags(c, name); len(near) > 0 {
		return e.WithHint("did you mean %s?", strings.Join(near, " or "))
	}
	return e.WithHint("see %s --help", c.CommandPath())
}

// nearFlags are the flags of c (its own and the inherited ones) within edit distance 2 of name,
// or whose name contains it, nearest first.
func nearFlags(c *cobra.Command, name string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		seen[f.Name] = true
		d := editDistance(name, f.Name)
		// A prefix or a part of a longer name counts as near: --report for --lock-report.
		if len(name) >= 3 && strings.Contains(f.Name, name) && d > 2 {
			d = 2
		}
		if d <= 2 {
			cs = append(cs, cand{f.Name, d})
		}
	}
	c.LocalFlags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d || cs[i].d == cs[j].d && cs[i].name < cs[j].name })
	var out []string
	for _, x := range cs {
		out = append(out, "--"+x.name)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
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

// newHelpCmd is `ql3 help [command]`: cobra's own prints the root's help and exits 0 for an
// unknown topic.
func newHelpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:     "help [command]",
		Short:   "Help about any command",
		Example: "  ql3 help store verify",
		RunE: func(_ *cobra.Command, args []string) error {
			c, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return usage("unknown help topic %s", refuse.Ident(strings.Join(args, " "))).
					WithHint("one of: %s", strings.Join(subcommands(root), ", "))
			}
			return c.Help()
		},
	}
}

// wantsJSON says whether the command line asks for json output, for a usage error raised before
// the flags were parsed to the end.
func wantsJSON(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "-ojson", a == "--output=json", a == "-o=json":
			return true
		case (a == "-o" || a == "--output") && i+1 < len(args) && args[i+1] == "json":
			return true
		}
	}
	return false
}

// Package refdoc renders the reference pages under docs/reference from
// the code they describe, so that they cannot drift from it: a command's
// every flag from its cobra command tree (Commands), and a configuration
// file's every field from its Go types' json tags and doc comments
// (Configuration). Each page has a test in the package owning the code
// that compares the committed page with what is rendered (Check) and
// rewrites it when asked to.
package refdoc

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Commands renders root and its subcommands as a Markdown page: for each
// command its description, usage line, examples and every flag with its
// type, default and help. regenerate is the command that rewrites the
// page, named in the page's header. Hidden commands and flags, and
// cobra's own help command and flag, are left out.
func Commands(root *cobra.Command, regenerate string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", root.Name())
	header(&b, regenerate)
	commandSection(&b, root, true)
	return b.Bytes()
}

// header writes the note every generated page starts with.
func header(b *bytes.Buffer, regenerate string) {
	fmt.Fprintf(b, "<!-- Generated from the code by `%s`; do not edit by hand. -->\n\n", regenerate)
}

// commandSection writes cmd's section, then its subcommands'.
func commandSection(b *bytes.Buffer, cmd *cobra.Command, root bool) {
	if !root {
		fmt.Fprintf(b, "## %s\n\n", cmd.CommandPath())
	}
	if cmd.Short != "" {
		b.WriteString(text(strings.TrimSuffix(cmd.Short, ".")) + ".\n\n")
	}
	if cmd.Long != "" {
		writeLong(b, cmd.Long)
	}
	fmt.Fprintf(b, "```text\n%s\n```\n\n", usageLine(cmd))
	if cmd.Example != "" {
		fmt.Fprintf(b, "Examples:\n\n```text\n%s\n```\n\n", strings.TrimRight(dedent(cmd.Example), "\n"))
	}
	subs := visibleCommands(cmd)
	if len(subs) > 0 {
		b.WriteString("Commands:\n\n")
		for _, s := range subs {
			fmt.Fprintf(b, "- [`%s`](#%s): %s\n", s.CommandPath(), Anchor(s.CommandPath()), text(s.Short))
		}
		b.WriteString("\n")
	}
	if cmd.HasAvailablePersistentFlags() && len(subs) > 0 {
		b.WriteString("Flags of every command:\n\n")
		flagTable(b, cmd.PersistentFlags())
	}
	local := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) { local.AddFlag(f) })
	if !(len(subs) > 0) {
		// A command without subcommands lists its persistent flags
		// with the rest.
		cmd.PersistentFlags().VisitAll(func(f *pflag.Flag) { local.AddFlag(f) })
	}
	if hasVisible(local) {
		if len(subs) > 0 {
			b.WriteString("Flags of this command alone:\n\n")
		} else {
			b.WriteString("Flags:\n\n")
		}
		flagTable(b, local)
	}
	if !root && cmd.HasParent() && hasVisible(cmd.InheritedFlags()) {
		fmt.Fprintf(b, "and the flags of every command of [`%s`](#%s).\n\n", cmd.Root().Name(), Anchor(cmd.Root().Name()))
	}
	for _, s := range subs {
		commandSection(b, s, false)
	}
}

// usageLine is cmd's usage without cobra's generic [flags] noise for
// commands that have none.
func usageLine(cmd *cobra.Command) string {
	if len(visibleCommands(cmd)) > 0 && !cmd.Runnable() {
		return cmd.CommandPath() + " COMMAND [flags]"
	}
	return cmd.UseLine()
}

// visibleCommands are cmd's subcommands users see, by name.
func visibleCommands(cmd *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range cmd.Commands() {
		if s.Hidden || s.Name() == "help" || s.Name() == "completion" || s.Deprecated != "" {
			continue
		}
		out = append(out, s)
	}
	return out
}

// hasVisible reports whether fs has a flag flagTable lists.
func hasVisible(fs *pflag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if listed(f) {
			n++
		}
	})
	return n > 0
}

// listed reports whether f belongs in the reference.
func listed(f *pflag.Flag) bool {
	return !f.Hidden && f.Deprecated == "" && f.Name != "help"
}

// flagTable writes fs's flags, sorted by name, as a table.
func flagTable(b *bytes.Buffer, fs *pflag.FlagSet) {
	b.WriteString("| flag | default | |\n|---|---|---|\n")
	fs.VisitAll(func(f *pflag.Flag) {
		if !listed(f) {
			return
		}
		typ, usage := pflag.UnquoteUsage(f)
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		if typ != "" {
			name += " " + typ
		}
		def := ""
		switch f.DefValue {
		case "", "[]":
		default:
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", name, def, cell(usage))
	})
	b.WriteString("\n")
}

// writeLong writes a command's long description: its paragraphs as text,
// its indented lines (examples) as a block.
func writeLong(b *bytes.Buffer, long string) {
	lines := strings.Split(strings.TrimSpace(long), "\n")
	for i := 0; i < len(lines); {
		if strings.HasPrefix(lines[i], "  ") {
			b.WriteString("```text\n")
			for ; i < len(lines) && strings.HasPrefix(lines[i], "  "); i++ {
				b.WriteString(strings.TrimPrefix(lines[i], "  ") + "\n")
			}
			b.WriteString("```\n\n")
			continue
		}
		var para []string
		for ; i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "  "); i++ {
			para = append(para, lines[i])
		}
		for ; i < len(lines) && lines[i] == ""; i++ {
		}
		if len(para) > 0 {
			b.WriteString(text(strings.Join(para, " ")) + "\n\n")
		}
	}
}

// dedent removes the two spaces cobra's examples are indented by.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "  ")
	}
	return strings.Join(lines, "\n")
}

// text escapes s for Markdown prose: an angle bracket would open an HTML
// tag and asterisks emphasis.
func text(s string) string {
	r := strings.NewReplacer("<", "&lt;", ">", "&gt;", "*", `\*`)
	return r.Replace(s)
}

// cell escapes s for a table cell: as text, on one line, with its pipes
// escaped.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := strings.NewReplacer("<", "&lt;", ">", "&gt;", "*", `\*`, "|", `\|`)
	return r.Replace(s)
}

// Anchor is the fragment GitHub gives a heading of this text: lower case,
// punctuation other than hyphens and underscores removed, spaces made
// hyphens. (A repeated heading gets -1, -2, ... appended, which Anchor
// cannot know.)
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case unicode.IsLetter(r), unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

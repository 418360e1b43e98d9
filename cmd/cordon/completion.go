package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// runCompletion prints a completion script for bash, zsh or fish: the
// verbs, their sub-verbs and their flags; files otherwise.
func runCompletion(e *env, args []string) error {
	fs := flag.NewFlagSet("completion", flag.ContinueOnError)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	hint := "cordon completion bash|zsh|fish; e.g. 'source <(cordon completion bash)'"
	if len(pos) != 1 {
		return &usageError{msg: fmt.Sprintf("completion: want one shell, got %d arguments", len(pos)), hint: hint}
	}
	tree := completionTree()
	var b strings.Builder
	switch pos[0] {
	case "bash":
		bashCompletion(&b, tree)
	case "zsh":
		zshCompletion(&b, tree)
	case "fish":
		fishCompletion(&b, tree)
	default:
		return &usageError{msg: fmt.Sprintf("completion: unknown shell %q", pos[0]), hint: hint}
	}
	_, err = io.WriteString(e.stdout, b.String())
	return err
}

// compNode is a verb or sub-verb: its name, summary, flags and sub-verbs.
type compNode struct {
	name, summary string
	flags         []string // "--name", sorted
	subs          []compNode
}

// completionTree lists every verb with its sub-verbs and flags. The flags
// are those each verb defines: it is asked for its help, quietly.
func completionTree() []compNode {
	var tree []compNode
	for _, v := range verbs() {
		n := compNode{name: v.name, summary: v.summary}
		switch {
		case v.name == "completion":
			n.subs = []compNode{{name: "bash"}, {name: "zsh"}, {name: "fish"}}
		case v.name == "help":
			for _, h := range verbs() {
				if h.name != "help" {
					n.subs = append(n.subs, compNode{name: h.name, summary: h.summary})
				}
			}
		case subverbs(v.name) != nil:
			for _, s := range subverbs(v.name) {
				n.subs = append(n.subs, compNode{name: s.name, summary: s.summary, flags: verbFlags(v, s.name)})
			}
		default:
			n.flags = verbFlags(v)
		}
		tree = append(tree, n)
	}
	return tree
}

// verbFlags runs a verb with --help, output discarded, and returns the
// flags of the flag set it would describe.
func verbFlags(v verb, sub ...string) []string {
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	err := v.run(e, append(sub, "--help"))
	var hr *helpRequest
	if !errors.As(err, &hr) || hr.fs == nil {
		return []string{"--help"}
	}
	flags := []string{"--help"}
	hr.fs.VisitAll(func(f *flag.Flag) { flags = append(flags, "--"+f.Name) })
	slices.Sort(flags)
	return flags
}

func names(nodes []compNode) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.name)
	}
	return strings.Join(s, " ")
}

func bashCompletion(w io.Writer, tree []compNode) {
	fmt.Fprintf(w, `# bash completion for cordon; load it with
#   source <(cordon completion bash)
_cordon() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local words="" flags=""
	if [ "$COMP_CWORD" -eq 1 ]; then
		words=%q
	else
		case "${COMP_WORDS[1]}" in
`, names(tree))
	for _, n := range tree {
		fmt.Fprintf(w, "\t\t%s)\n", n.name)
		if len(n.subs) > 0 {
			fmt.Fprintf(w, "\t\t\tif [ \"$COMP_CWORD\" -eq 2 ]; then\n\t\t\t\twords=%q\n\t\t\telse\n\t\t\t\tcase \"${COMP_WORDS[2]}\" in\n", names(n.subs)+" --help")
			for _, s := range n.subs {
				if len(s.flags) > 0 {
					fmt.Fprintf(w, "\t\t\t\t%s) flags=%q ;;\n", s.name, strings.Join(s.flags, " "))
				}
			}
			fmt.Fprintf(w, "\t\t\t\tesac\n\t\t\tfi\n")
		} else if len(n.flags) > 0 {
			fmt.Fprintf(w, "\t\t\tflags=%q\n", strings.Join(n.flags, " "))
		}
		fmt.Fprintf(w, "\t\t\t;;\n")
	}
	fmt.Fprint(w, `		esac
		case "$cur" in
		-*) words=$flags ;;
		esac
	fi
	if [ -n "$words" ]; then
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
	fi
}
complete -o default -o bashdefault -F _cordon cordon
`)
}

// zshItem is a _describe item, NAME:SUMMARY, in single quotes; colons
// within are escaped.
func zshItem(name, summary string) string {
	esc := func(s string) string { return strings.ReplaceAll(s, ":", `\:`) }
	s := esc(name) + ":" + esc(summary)
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func zshCompletion(w io.Writer, tree []compNode) {
	fmt.Fprint(w, `#compdef cordon
# zsh completion for cordon; load it with
#   source <(cordon completion zsh)
# or save it as _cordon in a directory on $fpath.
_cordon() {
	local -a words_ flags_
	if (( CURRENT == 2 )); then
		words_=(
`)
	for _, n := range tree {
		fmt.Fprintf(w, "\t\t\t%s\n", zshItem(n.name, n.summary))
	}
	fmt.Fprint(w, `		)
		_describe 'command' words_
		return
	fi
	case $words[2] in
`)
	for _, n := range tree {
		fmt.Fprintf(w, "\t%s)\n", n.name)
		if len(n.subs) > 0 {
			fmt.Fprintf(w, "\t\tif (( CURRENT == 3 )); then\n\t\t\twords_=(\n")
			for _, s := range n.subs {
				fmt.Fprintf(w, "\t\t\t\t%s\n", zshItem(s.name, s.summary))
			}
			fmt.Fprintf(w, "\t\t\t)\n\t\t\t_describe 'subcommand' words_\n\t\t\treturn\n\t\tfi\n\t\tcase $words[3] in\n")
			for _, s := range n.subs {
				if len(s.flags) > 0 {
					fmt.Fprintf(w, "\t\t%s) flags_=(%s) ;;\n", s.name, strings.Join(s.flags, " "))
				}
			}
			fmt.Fprintf(w, "\t\tesac\n")
		} else if len(n.flags) > 0 {
			fmt.Fprintf(w, "\t\tflags_=(%s)\n", strings.Join(n.flags, " "))
		}
		fmt.Fprintf(w, "\t\t;;\n")
	}
	fmt.Fprint(w, `	esac
	if [[ $PREFIX == -* ]]; then
		compadd -- $flags_
	else
		_files
	fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
	_cordon "$@"
else
	compdef _cordon cordon
fi
`)
}

// fishQuote quotes s for fish in single quotes.
func fishQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

func fishCompletion(w io.Writer, tree []compNode) {
	fmt.Fprint(w, "# fish completion for cordon; load it with\n#   cordon completion fish | source\n")
	verbs := names(tree)
	for _, n := range tree {
		fmt.Fprintf(w, "complete -c cordon -n 'not __fish_seen_subcommand_from %s' -f -a %s -d %s\n", verbs, n.name, fishQuote(n.summary))
		if len(n.subs) > 0 {
			subs := names(n.subs)
			for _, s := range n.subs {
				fmt.Fprintf(w, "complete -c cordon -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -f -a %s -d %s\n", n.name, subs, s.name, fishQuote(s.summary))
				for _, f := range s.flags {
					fmt.Fprintf(w, "complete -c cordon -n '__fish_seen_subcommand_from %s; and __fish_seen_subcommand_from %s' -l %s\n", n.name, s.name, strings.TrimPrefix(f, "--"))
				}
			}
		}
		for _, f := range n.flags {
			fmt.Fprintf(w, "complete -c cordon -n '__fish_seen_subcommand_from %s' -l %s\n", n.name, strings.TrimPrefix(f, "--"))
		}
	}
}

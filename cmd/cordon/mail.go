package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordon-dev/cordon/agent/mailbox"
)

const mailUsage = "usage: cordon mail [--reply TEXT|-] WORKSPACE"

// runMail shows an agent's mailbox (WORKSPACE/.cordon/mailbox), or posts
// the operator's reply to it with --reply. "--reply -" reads the reply
// from standard input, less one trailing newline.
func runMail(e *env, args []string) error {
	fs := flag.NewFlagSet("mail", flag.ContinueOnError)
	reply := fs.String("reply", "", "post this text as the operator's reply (- reads standard input)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &usageError{msg: fmt.Sprintf("mail: want one workspace, got %d arguments", len(pos)), hint: mailUsage}
	}
	ws, err := filepath.Abs(pos[0])
	if err != nil {
		return fmt.Errorf("mail: workspace %q: %w", pos[0], err)
	}
	replying := false
	fs.Visit(func(f *flag.Flag) { replying = replying || f.Name == "reply" })
	if replying {
		return mailReply(e, ws, *reply)
	}
	return mailList(e, ws)
}

func mailReply(e *env, ws, text string) error {
	if text == "-" {
		data, err := io.ReadAll(io.LimitReader(e.stdin, mailbox.MaxText+2))
		if err != nil {
			return fmt.Errorf("mail: read <stdin>: %w", err)
		}
		if len(data) > mailbox.MaxText+1 {
			return fmt.Errorf("mail: <stdin>: reply over %d bytes; shorten it", mailbox.MaxText)
		}
		text = strings.TrimSuffix(string(data), "\n")
	}
	m, err := mailbox.Post(ws, mailbox.FromOperator, text, time.Now())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "replied #%d\n", m.Seq)
	return err
}

// mailList prints both logs merged, ordered by time, then sender, then
// seq: a "#SEQ TIME" line (with " operator" for the operator's replies),
// then the text indented by two spaces, then a blank line between
// messages. The mailbox package has already refused any control
// character but newline and tab, so the text is safe to print.
func mailList(e *env, ws string) error {
	var all []mailbox.Message
	for _, from := range []string{mailbox.FromAgent, mailbox.FromOperator} {
		msgs, err := mailbox.List(ws, from)
		if err != nil {
			return err
		}
		all = append(all, msgs...)
	}
	if len(all) == 0 {
		_, err := fmt.Fprintln(e.stdout, "no messages")
		return err
	}
	// Times are RFC 3339 UTC to the second: they sort as strings.
	slices.SortStableFunc(all, func(a, b mailbox.Message) int {
		return cmp.Or(strings.Compare(a.Time, b.Time), strings.Compare(a.From, b.From), cmp.Compare(a.Seq, b.Seq))
	})
	var b strings.Builder
	for i, m := range all {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "#%d %s", m.Seq, m.Time)
		if m.From != mailbox.FromAgent {
			fmt.Fprintf(&b, " %s", m.From)
		}
		b.WriteString("\n")
		for line := range strings.SplitSeq(m.Text, "\n") {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	_, err := io.WriteString(e.stdout, b.String())
	return err
}

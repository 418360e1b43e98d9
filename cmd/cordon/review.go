package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strings"
)

// runReview is the review of finished runs' changes: show one, accept or
// decline it as an approver, and read or set the operator's risk policy.
func runReview(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "review: missing subcommand", hint: "use show, accept, decline or policy"}
	}
	switch sub, args := args[0], args[1:]; sub {
	case "show":
		c, pos, err := clientVerb("review show", args, []string{"RUN"}, nil)
		if err != nil {
			return err
		}
		b, err := c.call("GET", "/v1/runs/"+url.PathEscape(pos[0])+"/review", nil)
		if err != nil {
			return fmt.Errorf("review show: %w", err)
		}
		return c.print(e, b, reviewLines)
	case "accept", "decline":
		var reason *string
		c, pos, err := clientVerb("review "+sub, args, []string{"RUN"}, func(fs *flag.FlagSet) {
			reason = fs.String("reason", "", "why (required to decline)")
		})
		if err != nil {
			return err
		}
		if sub == "decline" && strings.TrimSpace(*reason) == "" {
			return &usageError{msg: "review decline: --reason is required", hint: "say what is wrong with the change"}
		}
		body, _ := json.Marshal(map[string]string{"reason": *reason})
		b, err := c.call("POST", "/v1/runs/"+url.PathEscape(pos[0])+"/review/"+sub, body)
		if err != nil {
			return fmt.Errorf("review %s: %w", sub, err)
		}
		return c.print(e, b, reviewLines)
	case "policy":
		fs := flag.NewFlagSet("review policy", flag.ContinueOnError)
		cf := addClientFlags(fs)
		pos, err := parseFlags(fs, args)
		if err != nil {
			return err
		}
		file, err := oneArg(pos)
		if err != nil {
			return err
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		if file == "" {
			b, err := c.call("GET", "/v1/risk-policy", nil)
			if err != nil {
				return fmt.Errorf("review policy: %w", err)
			}
			return c.print(e, b, nil)
		}
		p, err := readLimited(file, 1<<20)
		if err != nil {
			return fmt.Errorf("review policy: %w", err)
		}
		// Setting the policy can lower what approvals changes need: an
		// explicit operator action, as the server requires.
		b, err := c.call("PUT", "/v1/risk-policy", p, "Cordon-Explicit-Admin", "1")
		if err != nil {
			return fmt.Errorf("review policy: %w", err)
		}
		return c.print(e, b, func(v any) string { return "risk policy " + str(v, "policy") + " is in force\n" })
	}
	return &usageError{msg: fmt.Sprintf("review: unknown subcommand %q", args[0]), hint: "use show, accept, decline or policy"}
}

// reviewLines is a review for people: its state, tier, what matched and
// who decided.
func reviewLines(v any) string {
	m, _ := v.(map[string]any)
	var s strings.Builder
	needed, _ := m["needed"].(float64)
	fmt.Fprintf(&s, "run %s: change %s, risk %s, needs %d approver(s)\n", str(v, "run"), str(v, "state"), str(v, "tier"), int(needed))
	if c, ok := m["classification"].(map[string]any); ok {
		if files, ok := c["files"].([]any); ok {
			for _, f := range files {
				fmt.Fprintf(&s, "  changed  %q\n", f)
			}
		}
		if ms, ok := c["matches"].([]any); ok {
			for _, x := range ms {
				line := ""
				if n, _ := x.(map[string]any)["line"].(float64); n > 0 {
					line = fmt.Sprintf(":%d", int(n))
				}
				fmt.Fprintf(&s, "  %-6s   %q%s matched %s pattern %q\n", str(x, "tier"), str(x, "path"), line, str(x, "kind"), str(x, "pattern"))
			}
		}
	}
	if ds, ok := m["decisions"].([]any); ok {
		for _, d := range ds {
			fmt.Fprintf(&s, "  %-8s by %s at %s %q\n", str(d, "decision"), str(d, "user"), str(d, "at"), str(d, "reason"))
		}
	}
	return s.String()
}

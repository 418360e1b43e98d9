package main

import (
	"flag"
	"fmt"
)

// runAudit is `cordon audit export`: the control plane's audit log as
// JSONL ending with the signed head (a tenant key gets its own tenant's
// records revealed and the others' masked; the admin key gets all).
// Verify it offline with `cordon verify audit --pubkey audit.pub FILE`
// (GET /v1/audit.pub).
func runAudit(e *env, args []string) error {
	if len(args) == 0 || args[0] != "export" {
		return &usageError{msg: "audit: want the subcommand export", hint: "usage: cordon audit export [--server URL] [--out FILE]"}
	}
	var out *string
	c, _, err := clientVerb("audit export", args[1:], nil, func(fs *flag.FlagSet) {
		out = fs.String("out", "", "write the export to this new file (default: standard output)")
	})
	if err != nil {
		return err
	}
	b, err := c.call("GET", "/v1/audit/export", nil)
	if err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	if *out == "" {
		_, err := e.stdout.Write(b)
		return err
	}
	if err := writeNew(*out, b); err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	fmt.Fprintf(e.stderr, "cordon: audit export in %s: verify it with 'cordon verify audit --pubkey audit.pub %s' (GET /v1/audit.pub)\n", *out, *out)
	return nil
}

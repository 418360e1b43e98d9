package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// runSecret manages a tenant's secrets in the credential broker (admin
// key): `cordon secret set --tenant ID NAME [--from-file FILE]` reads the
// value from standard input or a file, never from a flag's value or an
// argument (which would land in shell history and the process list).
func runSecret(e *env, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "secret: missing subcommand", hint: "use set, rm or ls"}
	}
	var tenant, from *string
	tflag := func(fs *flag.FlagSet) { tenant = fs.String("tenant", "", "the tenant's id") }
	switch sub, args := args[0], args[1:]; sub {
	case "set":
		c, pos, err := clientVerb("secret set", args, []string{"NAME"}, func(fs *flag.FlagSet) {
			tflag(fs)
			from = fs.String("from-file", "", "read the value from this file (default: standard input)")
		})
		if err != nil {
			return err
		}
		var r io.Reader = e.stdin
		if *from != "" {
			b, err := readLimited(*from, 64<<10+2)
			if err != nil {
				return fmt.Errorf("secret set: %w", err)
			}
			defer clear(b)
			r = bytes.NewReader(b)
		}
		if r == nil {
			return &usageError{msg: "secret set: no value", hint: "pipe the value on standard input, or pass --from-file FILE"}
		}
		v, err := io.ReadAll(io.LimitReader(r, 64<<10+3))
		if err != nil {
			return fmt.Errorf("secret set: reading the value: %w", err)
		}
		defer clear(v)
		// One trailing newline (echo's, an editor's) is not the value's.
		body := bytes.TrimSuffix(bytes.TrimSuffix(v, []byte("\n")), []byte("\r"))
		if len(body) == 0 {
			return &usageError{msg: "secret set: the value is empty", hint: "pipe the value on standard input, or pass --from-file FILE"}
		}
		b, err := c.call("PUT", "/v1/tenants/"+url.PathEscape(*tenant)+"/secrets/"+url.PathEscape(pos[0]), body, "Content-Type", "application/octet-stream")
		if err != nil {
			return fmt.Errorf("secret set: %w", err)
		}
		return c.print(e, b, func(v any) string { return fmt.Sprintf("secret %s written\n", str(v, "secret")) })
	case "rm":
		c, pos, err := clientVerb("secret rm", args, []string{"NAME"}, tflag)
		if err != nil {
			return err
		}
		b, err := c.call("DELETE", "/v1/tenants/"+url.PathEscape(*tenant)+"/secrets/"+url.PathEscape(pos[0]), nil)
		if err != nil {
			return fmt.Errorf("secret rm: %w", err)
		}
		return c.print(e, b, func(v any) string { return fmt.Sprintf("secret %s deleted\n", str(v, "secret")) })
	case "ls":
		c, _, err := clientVerb("secret ls", args, nil, tflag)
		if err != nil {
			return err
		}
		b, err := c.call("GET", "/v1/tenants/"+url.PathEscape(*tenant)+"/secrets", nil)
		if err != nil {
			return fmt.Errorf("secret ls: %w", err)
		}
		return c.print(e, b, func(v any) string {
			var s strings.Builder
			for _, x := range v.([]any) {
				fmt.Fprintf(&s, "%s %s\n", str(x, "name"), str(x, "updated"))
			}
			return s.String()
		})
	}
	return &usageError{msg: fmt.Sprintf("secret: unknown subcommand %q", args[0]), hint: "use set, rm or ls"}
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-dev/cordon/evidence/sign"
)

// loadAuditKey returns the key that signs the audit log's head and from
// which its salts derive: name, or STATE/audit.key, made on first start.
// serve and every worker on one database must hold the same one (copy
// the server's to each worker and pass --audit-key).
func loadAuditKey(verb, state, name string) (*sign.PrivateKey, error) {
	if name == "" {
		name = filepath.Join(state, "audit.key")
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			k, err := sign.Generate()
			if err != nil {
				return nil, err
			}
			if err := sign.WritePrivate(name, k); err != nil {
				return nil, fmt.Errorf("%s: audit key: %w", verb, err)
			}
		}
	}
	if err := checkPrivate("audit key file", name); err != nil {
		return nil, fmt.Errorf("%s: %w", verb, err)
	}
	k, err := sign.LoadPrivate(name)
	if err != nil {
		return nil, fmt.Errorf("%s: audit key: %w", verb, err)
	}
	return k, nil
}

// loadSecrets reads the operator's secrets file: one entry a line, a
// secret value itself or file:PATH (the file's content, without its
// final newline); blank lines and lines starting with # are skipped. It
// returns the values that resolved and how many entries were configured:
// an entry that resolves to nothing (a missing or empty file) is
// reported on stderr, and when none resolves the server refuses every
// output that needs masking (the pool fails loud).
func loadSecrets(e *env, verb, name string) (values []string, configured int, err error) {
	if name == "" {
		return nil, 0, nil
	}
	if err := checkPrivate("secrets file", name); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", verb, err)
	}
	b, err := readLimited(name, 1<<20)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: secrets file: %w", verb, err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		configured++
		path, isFile := strings.CutPrefix(line, "file:")
		if !isFile {
			values = append(values, line)
			continue
		}
		c, err := readLimited(path, 1<<20)
		v := strings.TrimRight(string(c), "\r\n")
		if err != nil || v == "" {
			// The error names the line and the path, never a value.
			fmt.Fprintf(e.stderr, "cordon: %s: secrets file %s line %d: %s resolved to nothing (%v); it cannot be masked\n", verb, name, i+1, path, err)
			continue
		}
		values = append(values, v)
	}
	return values, configured, nil
}

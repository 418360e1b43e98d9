// Package ledger checks the project's claims ledger, CLAIMS.md: every
// enforcing function and every attacking test it names must exist. It also
// holds the import rules that keep the pure packages pure. It has no
// non-test code beyond this comment.
package ledger

// Package grant implements cordon's capability grants as specified in
// docs/SPEC.md §3: the grant set (a strict, canonical, content-addressed
// JSON document), the deny-by-default Enforcer that decides every request
// against it, and Covers, the attenuation check that lets a child grant
// set only narrow its parent.
//
// Grant sets and requests must already be canonical: a path with "..", a
// host with a trailing dot, an IP literal in a disguise such as "127.1",
// a port written "0443" are refused, never normalized. The Enforcer denies
// by default; deny rules override every allow; a Decision names the rule
// that decided it.
//
// The package is pure: no I/O, no network, no process spawning. Hashing
// executables for content-addressed exec control is done by the caller
// (package sandbox/exechash) and passed in the Query.
package grant

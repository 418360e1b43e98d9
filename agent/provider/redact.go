package provider

import "strings"

// redactFragment is the length of the key fragments redactKey looks for.
const redactFragment = 12

// redactKey replaces the key in s with [REDACTED], and also every run of
// s that matches a fragment of the key and holds one of its aligned
// 12-byte chunks, so a key that a hostile server split, or that a
// message was cut through, is removed too: any 12-byte prefix and any
// 24-byte piece of the key go.
func redactKey(s, key string) string {
	if key == "" {
		return s
	}
	s = strings.ReplaceAll(s, key, "[REDACTED]")
	if len(key) < redactFragment {
		return s
	}
	var spans [][2]int
	for k := 0; k+redactFragment <= len(key); k += redactFragment {
		chunk := key[k : k+redactFragment]
		for off := 0; ; {
			i := strings.Index(s[off:], chunk)
			if i < 0 {
				break
			}
			i += off
			lo, hi := i, i+redactFragment
			for kk := k; lo > 0 && kk > 0 && s[lo-1] == key[kk-1]; kk-- {
				lo--
			}
			for kk := k + redactFragment; hi < len(s) && kk < len(key) && s[hi] == key[kk]; kk++ {
				hi++
			}
			spans = append(spans, [2]int{lo, hi})
			off = hi
		}
	}
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		end := -1
		for _, sp := range spans {
			if sp[0] <= i && i < sp[1] && sp[1] > end {
				end = sp[1]
			}
		}
		if end < 0 {
			i++
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString("[REDACTED]")
		i, last = end, end
	}
	b.WriteString(s[last:])
	return b.String()
}

// Redact removes the client's API key, and fragments of it, from s. The
// runner passes everything it records or prints through it.
func (c *client) Redact(s string) string { return redactKey(s, c.key) }

func (a *anthropic) Redact(s string) string { return a.c.Redact(s) }
func (o *openAI) Redact(s string) string    { return o.c.Redact(s) }

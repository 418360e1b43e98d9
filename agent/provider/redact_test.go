package provider

import (
	"strings"
	"testing"
)

func TestRedactKey(t *testing.T) {
	key := "sk-ant-api03-" + strings.Repeat("AbCdEfGh", 10) + "-XyZ"
	for _, tc := range []struct{ name, in string }{
		{"whole", "x " + key + " y"},
		{"twice", key + key},
		{"split by a space", key[:30] + " " + key[30:]},
		{"cut at the end", "error: " + key[:14] + "…"},
		{"middle piece", "…" + key[40:70] + "…"},
		{"inside a word", "abc" + key + "def"},
	} {
		got := redactKey(tc.in, key)
		if !strings.Contains(got, "[REDACTED]") {
			t.Errorf("%s: nothing redacted in %q", tc.name, got)
		}
		for i := 0; i+24 <= len(key); i++ {
			if strings.Contains(got, key[i:i+24]) {
				t.Errorf("%s: %q still holds a 24-byte piece of the key", tc.name, got)
				break
			}
		}
		if strings.Contains(got, key[:12]) {
			t.Errorf("%s: %q still holds the key's prefix", tc.name, got)
		}
	}
	if got := redactKey("nothing secret here, sk-ant but not the key", key); got != "nothing secret here, sk-ant but not the key" {
		t.Errorf("unrelated text changed: %q", got)
	}
	if got := redactKey("short", ""); got != "short" {
		t.Errorf("no key: %q", got)
	}
}

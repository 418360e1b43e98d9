package sandbox

import (
	"testing"

	"github.com/cordon-dev/cordon/sandbox/internal/initpoller"
)

// In this test binary every sandbox init starts Go's network poller before
// init's main (package initpoller is initialized first), so every sandbox
// test here also checks that init keeps the runtime's descriptors.
func TestInitPollerProbeArmed(t *testing.T) {
	if initpoller.Arg0() != InitArg0 {
		t.Fatalf("initpoller recognizes init as %q, sandbox starts it as %q", initpoller.Arg0(), InitArg0)
	}
}

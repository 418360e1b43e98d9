//go:build unix

package mailbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestFIFORefused(t *testing.T) {
	ws := t.TempDir()
	must(t, os.MkdirAll(boxDir(ws), 0o700))
	for _, from := range []string{FromAgent, FromOperator} {
		must(t, syscall.Mkfifo(logPath(ws, from), 0o600))
	}
	must(t, syscall.Mkfifo(filepath.Join(boxDir(ws), "agent.cursor"), 0o600))
	refuses(t, ws) // and does not hang on opening a FIFO
}

//go:build !unix

package mailbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// nlink fails: without a link count a hard-linked log cannot be refused,
// so the mailbox is unsupported here.
func nlink(os.FileInfo) (uint64, error) {
	return 0, fmt.Errorf("hard-link count on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

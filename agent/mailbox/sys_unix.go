//go:build unix

package mailbox

import (
	"fmt"
	"os"
	"syscall"
)

// nlink returns the number of hard links of the file st describes.
func nlink(st os.FileInfo) (uint64, error) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("no link count in %T", st.Sys())
	}
	return uint64(sys.Nlink), nil
}

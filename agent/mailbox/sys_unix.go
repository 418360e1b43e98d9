//go:build unix

package mailbox

import (
	"fmt"
	"os"
	"syscall"
)

// oNonblock keeps an open of a FIFO swapped in after the Lstat from
// blocking; it has no effect on a regular file.
const oNonblock = syscall.O_NONBLOCK

// nlink returns the number of hard links of the file st describes.
func nlink(st os.FileInfo) (uint64, error) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("no link count in %T", st.Sys())
	}
	return uint64(sys.Nlink), nil
}

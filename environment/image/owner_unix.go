//go:build unix

package image

import (
	"io/fs"
	"syscall"
)

// ownerOf returns the uid that owns a file.
func ownerOf(st fs.FileInfo) (int, bool) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid), true
	}
	return 0, false
}

//go:build !unix

package runner

import "io/fs"

const (
	noFollow = 0
	nonBlock = 0
)

func links(fs.FileInfo) uint64 { return 1 }

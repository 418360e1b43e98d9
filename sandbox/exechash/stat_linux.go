package exechash

import (
	"os"
	"syscall"
)

func stat(f *os.File) (key, bool, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return key{}, false, err
	}
	k := key{
		dev:   uint64(st.Dev),
		ino:   uint64(st.Ino),
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
	}
	return k, st.Mode&syscall.S_IFMT == syscall.S_IFREG, nil
}

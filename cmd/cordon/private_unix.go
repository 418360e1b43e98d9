//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// checkPrivate refuses a state directory or key file that another user
// owns or that a group or others may write: whoever can write it can
// plant the admin key, the steward key or the database.
func checkPrivate(what, name string) error {
	st, err := os.Stat(name)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	euid := os.Geteuid()
	if s, ok := st.Sys().(*syscall.Stat_t); ok && int(s.Uid) != euid {
		return withHint(fmt.Errorf("%s %s is owned by uid %d, not by this process's uid %d", what, name, s.Uid, euid),
			fmt.Sprintf("chown %d %s, or use a state directory and key files of your own", euid, name))
	}
	if m := st.Mode().Perm(); m&0o022 != 0 {
		return withHint(fmt.Errorf("%s %s may be written by its group or others (mode %04o)", what, name, m),
			fmt.Sprintf("chmod go-w %s", name))
	}
	return nil
}

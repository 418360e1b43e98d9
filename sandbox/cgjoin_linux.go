package sandbox

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// maxJoinFiles bounds the cgroup files init accepts: two (join and
// leave) per v1 hierarchy cordon uses (memory, pids, cpu, cpuacct,
// freezer).
const maxJoinFiles = 16

// joinPair is the socket over which the parent hands init the run's
// cgroup v1 "tasks" files (fd 7 of init), once the cgroup is made.
func joinPair() (parent, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup join socket: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "cgroup join"), os.NewFile(uintptr(fds[1]), "cgroup join (init)"), nil
}

// sendFiles sends files over s in one message (SCM_RIGHTS); none sends
// nothing.
func sendFiles(s *os.File, files []*os.File) error {
	if len(files) == 0 {
		return nil
	}
	if len(files) > maxJoinFiles {
		return fmt.Errorf("%d cgroup files, more than %d", len(files), maxJoinFiles)
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	return unix.Sendmsg(int(s.Fd()), []byte{'j'}, unix.UnixRights(fds...), nil, 0)
}

// receiveFiles receives exactly n files that sendFiles sent over s, or
// fails: a short, truncated or malformed message is an error, and any
// descriptor it did carry is closed.
func receiveFiles(s *os.File, n int) ([]*os.File, error) {
	if n <= 0 || n > maxJoinFiles {
		return nil, fmt.Errorf("expecting %d cgroup files: not 1 to %d", n, maxJoinFiles)
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(maxJoinFiles*4))
	var (
		got, oobn, flags int
		err              error
	)
	for {
		got, oobn, flags, _, err = unix.Recvmsg(int(s.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("receiving the cgroup files: %w", err)
	}
	var fds []int
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, m := range msgs {
			if rights, rerr := unix.ParseUnixRights(&m); rerr == nil {
				fds = append(fds, rights...)
			}
		}
	}
	if got != 1 || buf[0] != 'j' || flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0 || len(fds) != n {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("a malformed cgroup message: %d bytes, %d files (want %d), flags %#x", got, len(fds), n, flags)
	}
	files := make([]*os.File, n)
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "cgroup tasks")
	}
	return files, nil
}

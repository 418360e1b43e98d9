package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/internal/phase"
)

// newRoot is where init builds the fresh root before pivot_root. It is a
// tmpfs mounted in init's private mount namespace, over the host's /tmp
// only as init sees it.
const newRoot = "/tmp"

// devices are the host device nodes bound into the minimal /dev.
var devices = []string{"null", "zero", "full", "random", "urandom"}

// maskedProc are /proc paths hidden behind /dev/null (files) or an empty
// read-only tmpfs (directories); readOnlyProc are made read-only. The
// lists follow runc's defaults, and add /proc/cmdline.
var (
	maskedProc = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/proc/kallsyms", "/proc/kmsg", "/proc/interrupts", "/proc/sysrq-trigger",
		"/proc/driver", "/proc/config.gz", "/proc/partitions",
		"/proc/cmdline", // the host's boot arguments
	}
	readOnlyProc = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"}
)

// buildRoot makes the sandbox's file system and enters it.
func buildRoot(cfg *initConfig) *initErr {
	steps := []struct {
		what string
		do   func(*initConfig) error
	}{
		{"making mounts private", func(*initConfig) error {
			return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
		}},
		{"mounting the root tmpfs", func(*initConfig) error {
			return unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=8m,mode=0755,nr_inodes=4096")
		}},
		{"binding the runtime", bindRuntime},
		{"writing /etc", writeEtc},
		{"building /dev", buildDev},
		{"mounting /proc", mountProc},
		{"mounting /tmp and /work", mountScratch},
		{"closing the runtime's program directories", noexecProgramDirs},
		{"applying the fs grants", applyFSGrants}, // fsgrant_linux.go; nothing without fs rules
		{"entering the new root", pivot},
		{"bringing up loopback", loopbackUp},
	}
	for _, s := range steps {
		if err := s.do(cfg); err != nil {
			return setupErr("sandbox init: %s: %v", s.what, err)
		}
		phase.Add(s.what)
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return setupErr("sandbox init: sethostname: %v", err)
	}
	return nil
}

// under returns p (absolute) beneath the new root.
func under(p string) string { return newRoot + p }

func bindRuntime(cfg *initConfig) error {
	if cfg.hasImage() {
		return bindImageRuntime(cfg) // image_linux.go
	}
	for _, p := range cfg.Runtime {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		dst := under(p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		case fi.IsDir():
			if err := os.Mkdir(dst, 0o755); err != nil {
				return err
			}
			if err := bindReadOnly(p, dst); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		default:
			return fmt.Errorf("%s is neither a directory nor a symbolic link", p)
		}
	}
	return nil
}

// bindReadOnly binds src at dst with the mounts beneath it, and makes
// every one of them read-only, nosuid and nodev: a host mount under the
// runtime (a tmpfs under /usr/local, say) must not keep its own flags.
func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return setRecursive(dst, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, 0)
}

// setRecursive sets and clears mount attributes on the mount at p and
// every mount beneath it (mount_setattr with AT_RECURSIVE). Setting a
// flag never clears another, so the flags the kernel locks on mounts
// inherited by a user namespace stay.
func setRecursive(p string, set, clr uint64) error {
	err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW,
		&unix.MountAttr{Attr_set: set, Attr_clr: clr})
	if err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	return nil
}

// remount sets flags on the bind mount at p, preserving the flags it
// already has that a user namespace may not clear.
func remount(p string, flags uintptr) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return err
	}
	locked := []struct{ st, ms uintptr }{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	}
	for _, l := range locked {
		if uintptr(st.Flags)&l.st != 0 {
			flags |= l.ms
		}
	}
	return unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|flags, "")
}

// etcFiles are the sandbox's /etc, at every tier: the program's user and
// group, the host name, and no resolver (there is no network to resolve
// on; egress goes through the proxy, which resolves).
func etcFiles(uid, gid int, hostname string) map[string]string {
	return map[string]string{
		"passwd":        fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:%d:%d:cordon sandbox:/work:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", uid, gid),
		"group":         fmt.Sprintf("root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", gid),
		"hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n",
		"hostname":      hostname + "\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
		"resolv.conf":   "",
	}
}

func writeEtc(cfg *initConfig) error {
	etc := under("/etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	files := etcFiles(cfg.UID, cfg.GID, cfg.Hostname)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	// The loader cache is not a secret, and without it every dynamic
	// program searches the default library path.
	if b, err := loaderCache(cfg); err != nil { // the host's or the image's (image_linux.go)
		return err
	} else if b != nil {
		if err := os.WriteFile(filepath.Join(etc, "ld.so.cache"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func buildDev(cfg *initConfig) error {
	dev := under("/dev")
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755,nr_inodes=64"); err != nil {
		return err
	}
	for _, d := range devices {
		dst := filepath.Join(dev, d)
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+d, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("/dev/%s: %w", d, err)
		}
	}
	links := map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return err
	}
	return unix.Mount("tmpfs", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, fmt.Sprintf("size=%d,mode=1777", cfg.TmpBytes))
}

func mountProc(*initConfig) error {
	proc := under("/proc")
	if err := os.Mkdir(proc, 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	null := under("/dev/null")
	for _, p := range maskedProc {
		dst := under(p)
		fi, err := os.Lstat(dst)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.IsDir() {
			err = unix.Mount("tmpfs", dst, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0,nr_inodes=1")
		} else {
			err = unix.Mount(null, dst, "", unix.MS_BIND, "")
		}
		if err != nil {
			return fmt.Errorf("masking %s: %w", p, err)
		}
	}
	for _, p := range readOnlyProc {
		dst := under(p)
		if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := unix.Mount(dst, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := remount(dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// mountScratch mounts the size-limited, noexec /tmp and /work. /work
// starts empty and belongs to the program's uid; the parent stages the
// declared inputs into it.
func mountScratch(cfg *initConfig) error {
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	tmp, work := under("/tmp"), under("/work")
	for _, d := range []string{tmp, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("tmpfs", tmp, "tmpfs", flags, fmt.Sprintf("size=%d,mode=1777", cfg.TmpBytes)); err != nil {
		return fmt.Errorf("/tmp: %w", err)
	}
	uid, gid := cfg.UID, cfg.GID
	if cfg.Rootless {
		uid, gid = 0, 0 // the parent stages as init's uid; chownWork hands /work over
	}
	opts := fmt.Sprintf("size=%d,mode=0755,uid=%d,gid=%d", cfg.WorkBytes, uid, gid)
	if err := unix.Mount("tmpfs", work, "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("/work: %w", err)
	}
	return nil
}

// noexecProgramDirs makes the runtime's program directories (bin, sbin,
// libexec) noexec, with every mount beneath them, then binds each allowed
// executable that lives in one back over itself, executable and
// read-only. A program that is not allowed is then unreachable by execve
// and by the dynamic loader alike (mmap with PROT_EXEC fails on a noexec
// mount), whatever it is called or linked as.
func noexecProgramDirs(cfg *initConfig) error {
	// First each program directory onto itself, with what is mounted
	// beneath it, all of it noexec (and, from the runtime bind, already
	// read-only, nosuid and nodev).
	for _, d := range cfg.NoExecDirs {
		dst := under(d)
		if err := unix.Mount(dst, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		if err := setRecursive(dst, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, 0); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
	}
	return execFilesExecutable(cfg, newRoot)
}

// execFilesExecutable binds each allowed file of cfg that lies in a
// program directory onto itself, root being where the new root is (""
// once it is entered): a bind mount takes its source mount's flags, so
// it is read-only, nosuid, nodev and noexec, and only noexec is cleared,
// on this one file's mount. A prepared sandbox does this when it is
// started (readLaunch), when it learns its program; a cold run while it
// builds the root.
func execFilesExecutable(cfg *initConfig, root string) error {
	for _, f := range cfg.ExecFiles {
		if !inAny(f, cfg.NoExecDirs) {
			continue
		}
		dst := root + f
		if err := unix.Mount(dst, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		err := unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_SYMLINK_NOFOLLOW, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_NOEXEC})
		if err != nil {
			return fmt.Errorf("%s: mount_setattr: %w", f, err)
		}
	}
	return nil
}

// inAny reports whether p lies beneath one of dirs.
func inAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// pivot makes the new root the root, detaches the old one and makes the
// root tmpfs read-only.
func pivot(*initConfig) error {
	if err := unix.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	return unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

// loopbackUp brings up lo, the only interface of the new network
// namespace.
func loopbackUp(*initConfig) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// hostname is the sandbox's host name.
func hostname(runID string) string { return "cordon-" + strings.ToLower(runID[:8]) }

package sandbox

// The image runtime (image.go) on Linux. The parent resolves runtime
// paths inside the image with openat2(RESOLVE_IN_ROOT) on a descriptor of
// its root, never with the host's path resolution: an absolute symbolic
// link in the image resolves within the image, and ".." stops at its
// root. Init, which runs as the tenant's host uid and cannot traverse
// the state directory, gets the same descriptor (protocol.go) and binds
// each runtime directory from it.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// imageRoot is an open image runtime.
type imageRoot struct {
	f    *os.File // O_PATH descriptor of the root file system
	root string   // its host path, as the kernel names it
}

// openImageDir opens the image's root directory (in the parent).
func openImageDir(ir *ImageRuntime) (*imageRoot, error) {
	if !strings.HasPrefix(ir.Root, "/") {
		return nil, refusedf("image runtime: the root %q is not an absolute path", ir.Root)
	}
	fd, err := unix.Open(ir.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, refusedf("image runtime: opening its root %s: %v (unpack the image again with 'cordon image unpack')", ir.Root, err)
	}
	f := os.NewFile(uintptr(fd), ir.Root)
	root, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.HasPrefix(root, "/") {
		f.Close()
		return nil, refusedf("image runtime: naming its root %s: %v", ir.Root, err)
	}
	return &imageRoot{f: f, root: strings.TrimSuffix(root, "/")}, nil
}

// openat2 opens the absolute path p inside the image: symbolic links
// resolve within its root, magic links not at all.
func openat2In(dirfd int, p string, flags int, resolve uint64) (int, error) {
	rel := strings.TrimPrefix(p, "/")
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | resolve}
	for {
		fd, err := unix.Openat2(dirfd, rel, &how)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		return fd, err
	}
}

func (r *imageRoot) openat(p string, flags int, resolve uint64) (int, error) {
	return openat2In(int(r.f.Fd()), p, flags, resolve)
}

// exists reports whether p names something in the image (a final
// symbolic link counts, as os.Lstat's does).
func (r *imageRoot) exists(p string) error {
	fd, err := r.openat(p, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	return unix.Close(fd)
}

// realpath resolves every symbolic link in p within the image and
// returns the path inside it.
func (r *imageRoot) realpath(p string) (string, error) {
	fd, err := r.openat(p, unix.O_PATH, 0)
	if err != nil {
		return "", &os.PathError{Op: "resolve in the image", Path: p, Err: err}
	}
	defer unix.Close(fd)
	host, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", err
	}
	if host == r.root {
		return "/", nil
	}
	inside, ok := strings.CutPrefix(host, r.root+"/")
	if !ok || r.root == "" {
		return "", fmt.Errorf("%s resolves to %s, outside the image's root %s", p, host, r.root)
	}
	return "/" + inside, nil
}

// open opens the resolved path p in the image for reading, through no
// symbolic link.
func (r *imageRoot) open(p string) (*os.File, error) {
	// O_NONBLOCK: a FIFO in the image must not block the open.
	fd, err := r.openat(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, unix.RESOLVE_NO_SYMLINKS)
	if err != nil {
		return nil, &os.PathError{Op: "open in the image", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), r.root+p), nil
}

// dirs returns the directories of dirs that are directories in the
// image, reached through no symbolic link (existingDirs in the image).
func (r *imageRoot) dirs(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if fd, err := r.openat(d, unix.O_PATH|unix.O_DIRECTORY, unix.RESOLVE_NO_SYMLINKS); err == nil {
			unix.Close(fd)
			out = append(out, d)
		}
	}
	return out
}

// binds lists the runtime directories and links the image has
// (runtimeBinds in the image); a path beneath a symbolic link (an
// /etc/alternatives under a linked /etc) is left out.
func (r *imageRoot) binds() []string {
	var out []string
	for _, p := range slices.Concat(runtimeRoots, []string{alternatives}) {
		if fd, err := r.openat(p, unix.O_PATH|unix.O_NOFOLLOW, unix.RESOLVE_NO_SYMLINKS); err == nil {
			unix.Close(fd)
			out = append(out, p)
		}
	}
	return out
}

// lstatRuntime is os.Lstat, in the image for a runtime path under one.
func lstatRuntime(fsp *fsPlan, p string) error {
	if img := fsp.image(); img != nil && inRuntime(p) {
		return img.exists(p)
	}
	_, err := os.Lstat(p)
	return err
}

// evalRuntime is filepath.EvalSymlinks, within the image for a runtime
// path under one.
func evalRuntime(fsp *fsPlan, p string) (string, error) {
	if img := fsp.image(); img != nil && inRuntime(p) {
		return img.realpath(p)
	}
	return filepath.EvalSymlinks(p)
}

// openRuntime opens a resolved path for reading: in the image for a
// runtime path under one.
func openRuntime(fsp *fsPlan, p string) (*os.File, error) {
	if img := fsp.image(); img != nil && inRuntime(p) {
		return img.open(p)
	}
	return os.Open(p)
}

// runtimePlan is the fs plan the run decides with: the one opened for
// its fs grants (nil without them), with the image runtime when the spec
// has one.
func (sb *Sandbox) runtimePlan() (*fsPlan, error) {
	if sb.img == nil {
		return sb.fs, nil
	}
	fsp := sb.fs
	if fsp == nil {
		var err error
		if fsp, err = planFS(sb.spec.Grants, sb.spec.Tier); err != nil {
			return nil, err
		}
	}
	// A host path bound beneath the runtime would be bound over the
	// image's read-only tree, and resolved in neither consistently.
	for _, b := range fsp.binds {
		if inRuntime(b.Path) {
			return nil, refusedf("%s: the host path %s lies in the runtime (%s), which is the image's on an image run: grant a path outside it, or put what it holds in the image", b.Rule, b.Path, strings.Join(runtimeRoots, ", "))
		}
	}
	fsp.img = sb.img
	return fsp, nil
}

// openImage opens the spec's image runtime, if any, and returns the
// descriptor init gets after the fs grants' trees (protocol.go), and
// what closes it and the parent's own. A rootless parent may not clone
// a mount tree (open_tree needs CAP_SYS_ADMIN): init, which runs as the
// caller, opens the caller's image itself (imageConfig, openImageRoot).
func (sb *Sandbox) openImage() ([]*os.File, func(), error) {
	if sb.spec.Image == nil {
		return nil, func() {}, nil
	}
	img, err := openImageDir(sb.spec.Image)
	if err != nil {
		return nil, nil, err
	}
	sb.img = img
	if sb.ids != nil {
		return nil, func() { img.f.Close() }, nil
	}
	// Init gets a detached copy of the root: a mount of the parent's
	// namespace cannot be bound in init's, a detached tree can be
	// attached there (as the fs grants' trees are).
	fd, err := unix.OpenTree(int(img.f.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		img.f.Close()
		return nil, nil, refusedf("image runtime: open_tree of %s: %v", sb.spec.Image.Root, err)
	}
	tree := os.NewFile(uintptr(fd), "image tree")
	return []*os.File{tree}, func() {
		tree.Close()
		img.f.Close()
	}, nil
}

// imageConfig makes init's runtime the image's.
func (sb *Sandbox) imageConfig(cfg *initConfig) {
	if sb.img == nil {
		return
	}
	cfg.Runtime, cfg.NoExecDirs = sb.img.binds(), sb.img.dirs(programDirs)
	if sb.ids == nil {
		cfg.Image = true
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(sb.img.f.Fd()), &st); err == nil {
		cfg.ImagePath = &imagePath{Path: sb.img.root, Dev: st.Dev, Ino: st.Ino}
	} else {
		cfg.ImagePath = &imagePath{Path: sb.img.root} // device 0: init refuses it
	}
}

// initImageFD is, in init, the descriptor of the image's root: the
// detached tree the parent passed, or a rootless run's own open.
var initImageFD = -1

// openImageRoot is init's first look at an image runtime: a rootless
// init opens the image's root by the path the parent decided on (before
// the root tmpfs is mounted over /tmp), and requires the directory the
// parent decided on.
func openImageRoot(cfg *initConfig) *initErr {
	switch {
	case cfg.Image:
		initImageFD = cfg.imageFD()
	case cfg.ImagePath != nil:
		ip := cfg.ImagePath
		fd, err := unix.Open(ip.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return setupErr("sandbox init: opening the image's root %s: %v", ip.Path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Dev != ip.Dev || st.Ino != ip.Ino || ip.Dev == 0 {
			unix.Close(fd)
			return setupErr("sandbox init: the image's root %s is not the directory decided on", ip.Path)
		}
		initImageFD = fd
	}
	return nil
}

// imageFiles is how many descriptors of an image runtime init has.
func (cfg *initConfig) imageFiles() int {
	if cfg.Image {
		return 1
	}
	return 0
}

// imageFD is init's descriptor of the detached tree of the image's root
// (protocol.go).
func (cfg *initConfig) imageFD() int { return 8 + len(cfg.Binds) }

// imageStage is where init attaches the image's tree while it binds the
// runtime from it; it is gone before pivot_root.
const imageStage = "/.image"

// bindImageRuntime is bindRuntime from the image: init attaches the
// image's tree at a staging point in the new root, binds each runtime
// entry from it, opened beneath it through no symbolic link, read-only
// (a directory) or mirrored (a link), then detaches and removes the
// staging point.
func bindImageRuntime(cfg *initConfig) error {
	if !cfg.Image { // rootless: the root init opened is in its own namespace already
		return bindImageEntries(cfg, initImageFD)
	}
	stage := under(imageStage)
	if err := os.Mkdir(stage, 0o700); err != nil {
		return err
	}
	if err := unix.MoveMount(initImageFD, "", unix.AT_FDCWD, stage, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attaching the image: move_mount: %w", err)
	}
	sfd, err := unix.Open(stage, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	if err := bindImageEntries(cfg, sfd); err != nil {
		return err
	}
	if err := unix.Unmount(stage, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the image's staging mount: %w", err)
	}
	return os.Remove(stage)
}

// bindImageEntries binds each runtime entry of the image root at rootfd.
func bindImageEntries(cfg *initConfig, rootfd int) error {
	for _, p := range cfg.Runtime {
		fd, err := openat2In(rootfd, p, unix.O_PATH|unix.O_NOFOLLOW, unix.RESOLVE_NO_SYMLINKS)
		if err != nil {
			return fmt.Errorf("image %s: %w", p, err)
		}
		err = bindImageEntry(fd, p)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("image %s: %w", p, err)
		}
	}
	return nil
}

func bindImageEntry(fd int, p string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	dst := under(p)
	if err := os.MkdirAll(dst[:strings.LastIndex(dst, "/")], 0o755); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		buf := make([]byte, 4096)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return err
		}
		return os.Symlink(string(buf[:n]), dst)
	case unix.S_IFDIR:
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		return bindReadOnly("/proc/self/fd/"+strconv.Itoa(fd), dst)
	}
	return errors.New("neither a directory nor a symbolic link")
}

// maxLoaderCache bounds the loader cache copied into the root tmpfs.
const maxLoaderCache = 4 << 20

// loaderCache is the runtime's /etc/ld.so.cache (nil when it has none):
// the host's, or the image's with an image runtime, whose descriptor it
// then closes (writeEtc is its last use).
func loaderCache(cfg *initConfig) ([]byte, error) {
	if !cfg.hasImage() {
		b, err := os.ReadFile("/etc/ld.so.cache")
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return b, err
	}
	defer unix.Close(initImageFD)
	fd, err := openat2In(initImageFD, "/etc/ld.so.cache", unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the image's /etc/ld.so.cache: %w", err)
	}
	f := os.NewFile(uintptr(fd), "ld.so.cache")
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("the image's /etc/ld.so.cache is not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxLoaderCache+1))
	if err == nil && len(b) > maxLoaderCache {
		err = fmt.Errorf("the image's /etc/ld.so.cache is larger than %d bytes", maxLoaderCache)
	}
	return b, err
}

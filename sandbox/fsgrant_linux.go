package sandbox

// fs grants as mounts (docs/sandbox.md, "Host paths: fs grants"). The
// parent plans them (planFS) while it decides the program; init applies
// them (applyFSGrants) as the last step of building the root, before
// pivot_root; Landlock gets their rights (fsGrantRules). A grant set
// without fs rules and deny.fs paths costs nothing here: the plan is
// empty and init's step returns at once.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/tier"
)

// reservedFS are paths no fs rule may name or lie beneath: the
// sandbox's own /proc and /dev, and the host's /sys.
var reservedFS = []string{"/proc", "/dev", "/sys"}

// socketDirs are where host services listen on pathname unix sockets.
// A bind of any access lets the program connect(2) to a socket beneath
// it (a read-only mount does not stop connect, and the Landlock ABI this
// sandbox uses has no right for it), so no fs rule may name or lie
// beneath them. Sockets elsewhere in a granted tree stay connectable
// (docs/sandbox.md, Known limitations).
var socketDirs = []string{"/run", "/var/run"}

// openNoSymlinks opens the absolute path p with O_PATH, resolving it from
// the directory root (the host's "/" or the new root) with openat2: no
// symbolic link (not even in a parent), no magic link, nothing outside
// root, and never a ".." (the path must be clean). It is how every
// granted path is resolved, on both sides.
func openNoSymlinks(root, p string) (int, error) {
	if !path.IsAbs(p) || path.Clean(p) != p || slices.Contains(strings.Split(p, "/"), "..") {
		return -1, fmt.Errorf("%s is not a clean absolute path", p)
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rfd)
	rel := strings.TrimPrefix(p, "/")
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{
		// No O_NOFOLLOW: with O_PATH it would open a final symbolic
		// link itself; RESOLVE_NO_SYMLINKS refuses it (ELOOP) instead.
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for range 16 {
		fd, err := unix.Openat2(rfd, rel, &how)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err == unix.ELOOP {
			return -1, fmt.Errorf("%s is or passes through a symbolic link (grant the real path%s)", p, realHint(p))
		}
		return fd, err
	}
	return -1, unix.EAGAIN
}

// realHint names the real path of p on the host, for an error message.
func realHint(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil && r != p {
		return ", " + r
	}
	return ""
}

// planFS plans the grant set's fs rules and deny.fs paths for a run at
// tier t. It refuses (naming the rule) a path the sandbox cannot grant,
// a host path that is missing, is not a directory or regular file, or
// passes through a symbolic link, and a writable host path at S3 or any
// host path at S4.
func planFS(gs *grant.Set, t tier.Tier) (*fsPlan, error) {
	p := &fsPlan{}
	for i, d := range gs.DenyFS {
		rule := fmt.Sprintf("deny.fs[%d]", i)
		switch {
		case d == "/":
			return nil, refusedf("%s: denying / leaves nothing to run", rule)
		case beneath("/work", d) || beneath("/tmp", d):
			return nil, refusedf("%s: %s is in the sandbox's own scratch space; what /work holds is decided by the declared inputs", rule, d)
		}
		p.masks = append(p.masks, fsMask{Path: d, Rule: rule})
	}
	for i, r := range gs.FS {
		rule := fmt.Sprintf("fs[%d]", i)
		acc := r.Access.String()
		if deniedBy(gs.DenyFS, r.Path) >= 0 {
			continue // deny.fs wins: nothing beneath a denied path is bound
		}
		switch {
		case r.Path == "/work" || r.Path == "/tmp":
			// The run's own scratch: always readable and writable; rwx
			// (or rx) makes it executable.
			if r.Access&grant.Exec != 0 {
				p.scratchExec = append(p.scratchExec, r.Path)
				p.execRoots = append(p.execRoots, r.Path)
				p.mounts = append(p.mounts, Mount{Kind: "scratch", Path: r.Path, Access: "rwx", Rule: rule})
			}
			continue
		case r.Path == "/" || r.Path == "/etc":
			return nil, refusedf("%s: %s cannot be bound: it would hide the sandbox's own root and /etc; grant the directories the program needs", rule, r.Path)
		case beneath("/work", r.Path) || beneath("/tmp", r.Path):
			return nil, refusedf("%s: %s is beneath the sandbox's scratch space; stage it as an input instead", rule, r.Path)
		}
		for _, res := range reservedFS {
			if beneath(res, r.Path) {
				return nil, refusedf("%s: %s is beneath %s, which the sandbox does not take from the host", rule, r.Path, res)
			}
		}
		for _, res := range socketDirs {
			if beneath(res, r.Path) {
				return nil, refusedf("%s: %s is beneath %s, where host services listen on unix sockets: a bind of any access lets the program connect to them; grant the files the program needs elsewhere", rule, r.Path, res)
			}
		}
		// The runtime is read-only inside already: a plain ro rule there
		// changes nothing, unless it narrows a wider rule above it.
		if r.Access == grant.Read && inRuntime(r.Path) && !coveredByWider(gs.FS, i) {
			continue
		}
		writable := r.Access&grant.Write != 0
		switch {
		case t == tier.S4:
			return nil, refusedf("%s: host paths are not bound at S4 in this build (%s %s)", rule, acc, r.Path)
		case t == tier.S3 && writable:
			return nil, refusedf("%s: a writable host path (%s %s) is refused at S3: tenants would share it; grant it ro or rx", rule, acc, r.Path)
		}
		fd, err := openNoSymlinks("/", r.Path)
		if err != nil {
			return nil, refusedf("%s: %s: %v", rule, r.Path, err)
		}
		st, err := fstatFD(fd)
		if err == nil {
			err = refusePseudoFS(fd)
		}
		unix.Close(fd)
		if err != nil {
			return nil, refusedf("%s: %s: %v", rule, r.Path, err)
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if !isDir && st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, refusedf("%s: %s is neither a directory nor a regular file", rule, r.Path)
		}
		p.binds = append(p.binds, fsBind{Path: r.Path, Access: acc, Rule: rule, Dev: st.Dev, Ino: st.Ino, Dir: isDir})
		p.mounts = append(p.mounts, Mount{Kind: "bind", Path: r.Path, Access: acc, Rule: rule, Writable: writable})
		if r.Access&grant.Exec != 0 {
			p.execRoots = append(p.execRoots, r.Path)
		}
	}
	if len(p.binds) > 0 && os.Geteuid() != 0 {
		// cordon opens and clones each granted tree as root, before init
		// starts (openTrees); an unprivileged caller cannot clone mounts.
		return nil, refusedf("%s: host paths are bound into the sandbox only when cordon runs as root; a rootless run cannot grant %s (run as root, or leave the rule out; /work and /tmp rwx and deny.fs work rootless)", p.binds[0].Rule, p.binds[0].Path)
	}
	if t == tier.S4 && (len(p.scratchExec) > 0 || len(p.masks) > 0) {
		return nil, refusedf("fs rules that make /work or /tmp executable, and deny.fs paths, are not applied at S4 in this build")
	}
	if err := refuseBeneathWritable(p.binds, p.masks); err != nil {
		return nil, err
	}
	// Parents before children: a rule beneath another is bound on top.
	slices.SortStableFunc(p.binds, func(a, b fsBind) int { return strings.Compare(a.Path, b.Path) })
	for i, m := range p.masks {
		// Only a mask that init will apply is reported: the path is on
		// the host now and the new root shows it (the runtime, or a
		// bind). Init refuses the run when a reported path has gone.
		if !visibleInside(p.binds, m.Path) {
			continue
		}
		p.masks[i].Seen = true
		p.mounts = append(p.mounts, Mount{Kind: "mask", Path: m.Path, Rule: m.Rule})
	}
	p.search = searchFor(p.execRoots)
	return p, nil
}

// pseudoFS are the kernel file systems whose mount a granted path may
// not be on: the host's processes, devices, cgroups, kernel tracing and
// security state. reservedFS refuses their usual places lexically; this
// refuses them wherever they are mounted (a chroot's /proc granted
// directly; the mounts beneath a granted path are never bound).
var pseudoFS = map[int64]string{
	unix.PROC_SUPER_MAGIC: "proc", unix.SYSFS_MAGIC: "sysfs", unix.CGROUP_SUPER_MAGIC: "cgroup",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2", unix.DEBUGFS_MAGIC: "debugfs", unix.TRACEFS_MAGIC: "tracefs",
	unix.SECURITYFS_MAGIC: "securityfs", unix.BPF_FS_MAGIC: "bpf", unix.DEVPTS_SUPER_MAGIC: "devpts",
	unix.PSTOREFS_MAGIC: "pstore", unix.EFIVARFS_MAGIC: "efivarfs",
	unix.BINFMTFS_MAGIC: "binfmt_misc", unix.NSFS_MAGIC: "nsfs",
}

// refusePseudoFS refuses the opened granted path fd when it is on one of
// pseudoFS.
func refusePseudoFS(fd int) error {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return err
	}
	if name, ok := pseudoFS[int64(sfs.Type)]; ok {
		return fmt.Errorf("it is on a %s file system, which the sandbox does not take from the host", name)
	}
	return nil
}

// rights is the set of rights an access string grants.
func rights(access string) (r, w, x bool) {
	return strings.Contains(access, "r"), strings.Contains(access, "w"), strings.Contains(access, "x")
}

// refuseBeneathWritable refuses a deny.fs path, or a bind that grants
// less than a writable (rw, rwx) bind above it, beneath that bind. Masks
// and nested binds are mounts on directory entries, and beneath a
// writable bind the program may rename any directory that is not itself
// a mount point: it moves the denied path's parent away, recreates the
// path and writes the host file the rule meant to protect (red team F1).
func refuseBeneathWritable(binds []fsBind, masks []fsMask) error {
	for _, w := range binds {
		_, ww, wx := rights(w.Access)
		if !ww {
			continue
		}
		for _, m := range masks {
			if m.Path != w.Path && beneath(w.Path, m.Path) {
				return refusedf("%s (%s) lies beneath %s (%s %s): beneath a writable bind the program can rename the denied path's parent and recreate the path on the host, so the denial cannot hold; grant the writable path's other entries one by one, or make it ro", m.Rule, m.Path, w.Rule, w.Access, w.Path)
			}
		}
		for _, b := range binds {
			if b.Path == w.Path || !beneath(w.Path, b.Path) {
				continue
			}
			_, bw, bx := rights(b.Access)
			if !bw || (wx && !bx) {
				return refusedf("%s (%s %s) lies beneath %s (%s %s) and grants less: beneath a writable bind the program can rename its parent and recreate the path with the wider access, so the narrower rule cannot hold; grant the writable path's other entries one by one instead", b.Rule, b.Access, b.Path, w.Rule, w.Access, w.Path)
			}
		}
	}
	return nil
}

// visibleInside reports whether the new root will show p: a file the
// sandbox writes in its own /etc, or a host path that exists (with no
// symbolic link on the way) in the runtime, /etc/alternatives,
// /etc/ld.so.cache or beneath a bind.
func visibleInside(binds []fsBind, p string) bool {
	if p == "/etc" {
		return true // the sandbox's own /etc
	}
	if dir, name := path.Split(p); dir == "/etc/" {
		if _, ok := etcFiles(0, 0, "")[name]; ok {
			return true // written by the sandbox, whatever the host has
		}
	}
	shown := inRuntime(p) || beneath(alternatives, p) || p == "/etc/ld.so.cache"
	for _, b := range binds {
		shown = shown || beneath(b.Path, p)
	}
	if !shown {
		return false
	}
	fd, err := openNoSymlinks("/", p)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// coveredByWider reports whether an fs rule that grants more than
// reading is an ancestor of rule i's path: a plain ro rule in the runtime
// is then bound, to narrow it; beneath only ro rules it changes nothing
// (and binding it would hide the executables bound back in program
// directories).
func coveredByWider(rules []grant.FSRule, i int) bool {
	for j, r := range rules {
		if j != i && r.Access != grant.Read && r.Path != rules[i].Path && beneath(r.Path, rules[i].Path) {
			return true
		}
	}
	return false
}

// searchFor is PATH inside the sandbox: for each executable root in
// grant order, the root itself when it is named bin, else its bin
// directory when it has one; then the runtime's searchPath.
func searchFor(roots []string) []string {
	var out []string
	for _, r := range roots {
		if r == "/work" || r == "/tmp" {
			continue // what a run builds is run by path, never found by name
		}
		dir := r + "/bin"
		if path.Base(r) == "bin" {
			dir = r
		}
		if fd, err := openNoSymlinks("/", dir); err == nil {
			st, err := fstatFD(fd)
			unix.Close(fd)
			if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && !slices.Contains(out, dir) {
				out = append(out, dir)
			}
		}
	}
	for _, d := range searchPath {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

func fstatFD(fd int) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	return st, err
}

// applyFSGrants is init's last step before pivot_root: it makes /work
// and /tmp executable where granted, binds each granted host path at the
// same path with exactly its access, and hides each deny.fs path.
func applyFSGrants(cfg *initConfig) error {
	for _, d := range cfg.ScratchExec {
		if d != "/work" && d != "/tmp" {
			return fmt.Errorf("scratch %q is neither /work nor /tmp", d)
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, under(d), unix.AT_SYMLINK_NOFOLLOW,
			&unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_NOEXEC}); err != nil {
			return fmt.Errorf("making %s executable: %w", d, err)
		}
	}
	first := 8 // protocol.go: the trees follow the cgroup socket (fd 7)
	for i, b := range cfg.Binds {
		if err := attachGranted(b, first+i); err != nil {
			return fmt.Errorf("%s (%s %s): %w", b.Rule, b.Access, b.Path, err)
		}
	}
	for _, m := range cfg.Masks {
		if err := maskDenied(m); err != nil {
			return fmt.Errorf("%s (%s): %w", m.Rule, m.Path, err)
		}
	}
	return nil
}

// bindAttrs are the mount attributes each access sets and clears. Every
// bind is nosuid and nodev; only rx and rwx are executable, only rw and
// rwx writable.
func bindAttrs(access string) (set, clr uint64, err error) {
	const always = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	switch access {
	case "ro":
		return always | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOEXEC, 0, nil
	case "rx":
		return always | unix.MOUNT_ATTR_RDONLY, unix.MOUNT_ATTR_NOEXEC, nil
	case "rw":
		return always | unix.MOUNT_ATTR_NOEXEC, unix.MOUNT_ATTR_RDONLY, nil
	case "rwx":
		return always, unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOEXEC, nil
	}
	return 0, 0, fmt.Errorf("unknown access %q", access)
}

// openTrees opens, on the host, a detached copy of each planned bind's
// mount, without the mounts beneath it (open_tree with OPEN_TREE_CLONE on the descriptor that
// openat2 resolved with no symbolic link, no ".." and no magic link) and
// sets its attributes (mount_setattr): the file the decision saw is the
// file bound, whatever happens to the path afterwards. cordon opens them
// as root because the sandbox's init runs as the tenant's host uid and
// may not traverse the path (a cache under /root, say). Init attaches
// each one (attachGranted); the caller closes them.
func openTrees(p *fsPlan) ([]*os.File, error) {
	var trees []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, t := range trees {
			t.Close()
		}
		return nil, err
	}
	for _, b := range p.binds {
		set, clr, err := bindAttrs(b.Access)
		if err != nil {
			return fail(err)
		}
		src, err := openNoSymlinks("/", b.Path)
		if err != nil {
			return fail(refusedf("%s: %s: %v", b.Rule, b.Path, err))
		}
		st, err := fstatFD(src)
		if err == nil && (st.Dev != b.Dev || st.Ino != b.Ino) {
			err = fmt.Errorf("the host path was replaced after the decision (device:inode %d:%d, decided %d:%d)", st.Dev, st.Ino, b.Dev, b.Ino)
		}
		var tree int
		if err == nil {
			// Not AT_RECURSIVE: a mount beneath the granted path (a
			// host procfs in a chroot, sysfs, another file system) is
			// not bound with it; the program sees the directory under
			// it instead (red team F3; docs/sandbox.md).
			tree, err = unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
		}
		unix.Close(src)
		if err != nil {
			return fail(refusedf("%s: %s: %v", b.Rule, b.Path, err))
		}
		trees = append(trees, os.NewFile(uintptr(tree), b.Path))
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE,
			&unix.MountAttr{Attr_set: set, Attr_clr: clr}); err != nil {
			return fail(refusedf("%s: %s: mount_setattr: %v", b.Rule, b.Path, err))
		}
	}
	return trees, nil
}

// attachGranted attaches the detached tree tree, opened by cordon for b,
// at b.Path in the new root (move_mount onto a descriptor of the mount
// point, resolved with no symbolic link).
func attachGranted(b fsBind, tree int) error {
	st, err := fstatFD(tree)
	if err != nil {
		return err
	}
	if st.Dev != b.Dev || st.Ino != b.Ino {
		return fmt.Errorf("the tree passed is not the one decided (device:inode %d:%d, decided %d:%d)", st.Dev, st.Ino, b.Dev, b.Ino)
	}
	// The mount point, in the new root: made in its tmpfs when the path
	// is not already there (a path in the runtime, or beneath an earlier
	// bind, is).
	dst, err := openNoSymlinks(newRoot, b.Path)
	if errors.Is(err, unix.ENOENT) {
		if err = makeMountPoint(b.Path, b.Dir); err == nil {
			dst, err = openNoSymlinks(newRoot, b.Path)
		}
	}
	if err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	defer unix.Close(dst)
	if err := unix.MoveMount(tree, "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// makeMountPoint creates p (a directory, or an empty file) and its
// missing parents in the new root, following no symbolic link.
func makeMountPoint(p string, dir bool) error {
	fd, err := unix.Open(newRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, name := range parts {
		last := i == len(parts)-1
		switch {
		case last && !dir:
			nfd, err := unix.Openat(fd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
			unix.Close(fd)
			if err != nil {
				return err
			}
			return unix.Close(nfd)
		default:
			if err := unix.Mkdirat(fd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return err
			}
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return err
		}
		fd = next
	}
	return unix.Close(fd)
}

// maskDenied hides a deny.fs path that the new root shows: a directory
// behind an empty read-only tmpfs, anything else behind /dev/null. A
// path the root does not show needs nothing; one that passes through a
// symbolic link inside refuses the run, since its real path would stay
// visible.
func maskDenied(m fsMask) error {
	fd, err := openNoSymlinks(newRoot, m.Path)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		if m.Seen {
			// Reported as masked when the run was decided: the journal
			// would say a mask was applied that was not.
			return fmt.Errorf("the denied path was there when the run was decided and is gone now; run again")
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	st, err := fstatFD(fd)
	if err != nil {
		return err
	}
	target := fmt.Sprintf("/proc/self/fd/%d", fd)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0,nr_inodes=1,mode=0555")
	}
	return unix.Mount(under("/dev/null"), target, "", unix.MS_BIND, "")
}

// fsGrantRules are the Landlock rules of the granted paths: write on rw
// and rwx binds, execute on rx and rwx binds and on /work or /tmp when
// granted rwx. Reading is the root rule's.
func fsGrantRules(cfg *initConfig, write, exe uint64) []struct {
	path   string
	access uint64
} {
	var rules []struct {
		path   string
		access uint64
	}
	add := func(p string, a uint64) {
		rules = append(rules, struct {
			path   string
			access uint64
		}{p, a})
	}
	for _, d := range cfg.ScratchExec {
		add(d, exe)
	}
	// A rule on a regular file may hold only the rights a file has.
	file := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE)
	for _, b := range cfg.Binds {
		var a uint64
		switch b.Access {
		case "rx":
			a = exe
		case "rw":
			a = write
		case "rwx":
			a = write | exe
		default:
			continue
		}
		if !b.Dir {
			a &= file
		}
		add(b.Path, a)
	}
	return rules
}

// openFS plans the spec's fs rules and opens their trees, before init
// starts; nothing happens without fs rules or deny.fs paths.
func (sb *Sandbox) openFS() ([]*os.File, error) {
	gs := sb.spec.Grants
	if len(gs.FS) == 0 && len(gs.DenyFS) == 0 {
		return nil, nil
	}
	fsp, err := planFS(gs, sb.spec.Tier)
	if err != nil {
		return nil, err
	}
	trees, err := openTrees(fsp)
	if err != nil {
		return nil, err
	}
	sb.fs = fsp
	return trees, nil
}

// hideDeniedOnPath enforces exec.deny inside the executable binds (rx
// and rwx; red team F2, F7): every regular file an exec bind shows that
// could be executed (an execute bit, or ELF or "#!" magic: the loader
// runs a file without one) is hashed, and one whose bytes have a denied
// hash is masked with /dev/null inside, whatever its name or place,
// runtime paths included. A single granted file with a denied hash
// refuses the run. The tree walked is what the sandbox binds (a clone
// of the path's mount without the mounts beneath it); nested binds and
// deny.fs paths are skipped (they hide what is beneath). It runs only
// when the grant set denies a hash and binds an executable path.
func (p *fsPlan) hideDeniedOnPath(deny []canon.ID) error {
	if len(deny) == 0 || p == nil {
		return nil
	}
	hidden := map[string]bool{}
	hide := func(path string, i int) {
		if hidden[path] {
			return
		}
		hidden[path] = true
		rule := fmt.Sprintf("exec.deny[%d]", i)
		p.masks = append(p.masks, fsMask{Path: path, Rule: rule, Seen: true})
		p.mounts = append(p.mounts, Mount{Kind: "mask", Path: path, Rule: rule})
	}
	for _, b := range p.binds {
		if _, _, x := rights(b.Access); !x {
			continue
		}
		if !b.Dir {
			id, ok, err := hashIfRunnable(b.Path)
			if err != nil {
				return refusedf("%s: hashing %s for denied hashes: %v", b.Rule, b.Path, err)
			}
			if i := slices.Index(deny, id); ok && i >= 0 {
				return refusedf("%s: %s (%s) is denied by content hash (exec.deny[%d]); leave the rule out or the hash", b.Rule, b.Path, b.Access, i)
			}
			continue
		}
		if err := p.walkDenied(b, deny, hide); err != nil {
			return err
		}
	}
	return nil
}

// walkDenied hashes the runnable files of the exec bind b (a directory)
// as the sandbox will show them, calling hide for each denied one.
func (p *fsPlan) walkDenied(b fsBind, deny []canon.ID, hide func(string, int)) error {
	src, err := openNoSymlinks("/", b.Path)
	if err != nil {
		return refusedf("%s: %s: %v", b.Rule, b.Path, err)
	}
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	unix.Close(src)
	if err != nil {
		return refusedf("%s: %s: open_tree: %v", b.Rule, b.Path, err)
	}
	defer unix.Close(tree)
	root := fmt.Sprintf("/proc/self/fd/%d/", tree)
	return filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return refusedf("%s: reading %s for denied hashes: %v", b.Rule, b.Path, err)
		}
		rel := strings.TrimPrefix(name, root)
		host := b.Path
		if rel != "" && rel != name {
			host = b.Path + "/" + strings.TrimPrefix(rel, "/")
		}
		if host != b.Path {
			for _, o := range p.binds {
				if o.Path == host {
					if d.IsDir() {
						return filepath.SkipDir // bound on its own (and walked if executable)
					}
					return nil
				}
			}
			for _, m := range p.masks {
				if m.Path == host && !strings.HasPrefix(m.Rule, "exec.deny") {
					if d.IsDir() {
						return filepath.SkipDir // masked by deny.fs
					}
					return nil
				}
			}
		}
		if !d.Type().IsRegular() {
			return nil
		}
		id, ok, err := hashIfRunnable(name)
		if err != nil {
			return refusedf("%s: hashing %s for denied hashes: %v", b.Rule, host, err)
		}
		if i := slices.Index(deny, id); ok && i >= 0 {
			hide(host, i)
		}
		return nil
	})
}

// hashIfRunnable hashes the file at p when it could be executed: it has
// an execute bit, or starts with ELF or "#!" magic (ld.so runs an ELF
// file without one, an interpreter a script). ok is false for a file
// that is neither, or is not a regular file (never opened blocking).
func hashIfRunnable(p string) (id canon.ID, ok bool, err error) {
	f, fi, err := openRegular(p)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, errNotRegular) {
			return canon.ID{}, false, nil // gone since the listing, or nothing execve runs
		}
		return canon.ID{}, false, err
	}
	defer f.Close()
	if fi.Mode().Perm()&0o111 == 0 {
		var magic [4]byte
		n, _ := f.ReadAt(magic[:], 0)
		if !(n == 4 && string(magic[:]) == "\x7fELF") && !(n >= 2 && string(magic[:2]) == "#!") {
			return canon.ID{}, false, nil
		}
	}
	id, err = hashes.SumFile(f)
	if err != nil {
		return canon.ID{}, false, err
	}
	return id, true, nil
}

package sandbox

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// corpusPrograms are the programs the corpus's grant set allows.
var corpusPrograms = []string{
	"sh", "dash", "bash", "python3", "git", "true", "false", "echo", "cat", "ls", "cp", "mv", "rm",
	"mkdir", "rmdir", "sort", "uniq", "wc", "head", "tail", "sed", "awk", "grep", "find", "xargs",
	"tee", "date", "sha256sum", "tr", "cut", "diff", "od", "stat", "touch", "ln", "chmod", "env",
	"sleep", "id", "uname", "printf", "basename", "dirname", "readlink", "seq", "mktemp", "test",
}

// corpusShell uses the coreutils and the usual text tools the way scripts
// do: pipes, redirections, subshells, background jobs, here-documents.
const corpusShell = `set -eu
cd /work
mkdir -p a/b/c
printf 'pear\napple\nfig\napple\n' > a/fruit.txt
sort a/fruit.txt | uniq -c | sort -rn | head -n 1 | awk '{print $2}' > a/top.txt
test "$(cat a/top.txt)" = apple
cp a/fruit.txt a/b/copy.txt
mv a/b/copy.txt a/b/c/moved.txt
ln -s ../../fruit.txt a/b/c/link.txt
ln a/fruit.txt a/hard.txt
test "$(readlink a/b/c/link.txt)" = ../../fruit.txt
touch -d '2020-01-02 03:04:05' a/old.txt
test "$(stat -c %Y a/old.txt)" -lt "$(date +%s)"
chmod 0600 a/old.txt
test "$(stat -c %a a/old.txt)" = 600
wc -l < a/fruit.txt | tr -d ' ' > a/n.txt
test "$(cat a/n.txt)" = 4
sed -e 's/apple/APPLE/g' a/fruit.txt | grep -c APPLE | grep -qx 2
find a -name '*.txt' -type f | sort | xargs -n 2 echo > a/found.txt
grep -q moved.txt a/found.txt
cut -d: -f1 < /etc/passwd | head -n 1 > /dev/null
printf 'x\n' | tee a/tee.txt > /dev/null
tail -n 2 a/fruit.txt | diff - a/fruit.txt > a/diff.txt || test $? = 1
od -An -tx1 a/tee.txt | tr -d ' \n' | grep -qx 780a
sha256sum a/fruit.txt | cut -c1-64 | grep -Eq '^[0-9a-f]{64}$'
env | grep -q '^HOME=/work$'
id -u > /dev/null
uname -s | grep -qx Linux
(sleep 0.1; echo bg > a/bg.txt) &
wait
test "$(cat a/bg.txt)" = bg
cat <<EOT > a/here.txt
$(seq 3 | tr '\n' ,)
EOT
grep -qx '1,2,3,' a/here.txt
d=$(mktemp -d)
echo t > "$d/f" && rm -r "$d"
basename /x/y.txt .txt | grep -qx y
ls -la a > /dev/null
ls -lR --color=always a > /dev/null
rm -rf a
echo shell-ok
`

// corpusPython exercises the standard library's use of the kernel:
// files, processes, threads, process pools (POSIX semaphores in
// /dev/shm), sockets, SQLite, compression, hashing, asyncio and unittest.
const corpusPython = `
import asyncio, errno, hashlib, io, json, mmap, multiprocessing, os, select, shutil, signal
import socket, sqlite3, subprocess, sys, tempfile, threading, time, unittest, zlib
import bz2, gzip, lzma


def square(x):
    return x * x


def main():
    os.chdir("/work")
    json.loads(json.dumps({"a": [1, 2, {"b": None}]}))
    os.makedirs("p/q", exist_ok=True)
    with open("p/q/f.txt", "w") as f:
        f.write("hello\n")
    assert os.stat("p/q/f.txt").st_size == 6
    os.rename("p/q/f.txt", "p/q/g.txt")
    assert sorted(os.listdir("p/q")) == ["g.txt"]
    shutil.copytree("p", "p2")
    shutil.rmtree("p2")

    out = subprocess.run(["sh", "-c", "echo sub; exit 3"], capture_output=True, text=True)
    assert out.stdout == "sub\n" and out.returncode == 3, out
    assert subprocess.check_output(["cat"], input=b"in") == b"in"

    results = []
    ts = [threading.Thread(target=lambda i=i: results.append(hashlib.sha256(b"%d" % i).hexdigest())) for i in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert len(results) == 8

    # Process pools: POSIX semaphores (sem_open in /dev/shm) and pipes.
    for method in ("fork", "spawn", "forkserver"):
        with multiprocessing.get_context(method).Pool(2) as pool:
            assert pool.map(square, range(5)) == [0, 1, 4, 9, 16], method
    q = multiprocessing.Queue()
    with multiprocessing.Lock():
        q.put(1)
    assert q.get(timeout=10) == 1

    # Sockets: a unix stream server, a socketpair, UDP and IPv6 sockets.
    # TCP bind and connect are Landlock's to refuse (EACCES), not seccomp's.
    path = "/tmp/corpus.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    def serve():
        c, _ = srv.accept()
        c.sendall(c.recv(100).upper())
        c.close()
    threading.Thread(target=serve).start()
    cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cl.connect(path)
    cl.sendall(b"ping")
    assert cl.recv(100) == b"PING"
    cl.close()
    a, b = socket.socketpair()
    a.sendall(b"x")
    assert b.recv(1) == b"x"
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    u.sendto(b"d", u.getsockname())
    assert u.recvfrom(10)[0] == b"d"
    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        t.bind(("127.0.0.1", 0))
        raise AssertionError("TCP bind worked")
    except OSError as e:
        assert e.errno == errno.EACCES, e

    db = sqlite3.connect("/work/t.db")
    db.execute("create table t (x integer)")
    db.executemany("insert into t values (?)", [(i,) for i in range(100)])
    db.commit()
    assert db.execute("select sum(x) from t").fetchone()[0] == 4950
    db.execute("pragma journal_mode=wal")
    db.close()

    data = b"cordon" * 1000
    assert zlib.decompress(zlib.compress(data)) == data
    assert gzip.decompress(gzip.compress(data)) == data
    assert bz2.decompress(bz2.compress(data)) == data
    assert lzma.decompress(lzma.compress(data)) == data
    hashlib.blake2b(data).hexdigest()

    with tempfile.TemporaryDirectory() as d:
        with tempfile.NamedTemporaryFile(dir=d) as f:
            f.write(b"x")
            f.flush()
    with tempfile.TemporaryFile() as f:
        f.write(b"y")

    m = mmap.mmap(-1, 4096)
    m[:3] = b"abc"
    m.close()
    r, w = os.pipe()
    os.write(w, b"z")
    select.select([r], [], [], 1)
    assert os.read(r, 1) == b"z"

    async def amain():
        proc = await asyncio.create_subprocess_exec("echo", "async", stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        assert out == b"async\n"
        async def handle(reader, writer):
            writer.write((await reader.read(10)).upper())
            await writer.drain()
            writer.close()
        server = await asyncio.start_unix_server(handle, "/tmp/aio.sock")
        reader, writer = await asyncio.open_unix_connection("/tmp/aio.sock")
        writer.write(b"aio")
        await writer.drain()
        assert await reader.read(10) == b"AIO"
        writer.close()
        server.close()
        await server.wait_closed()
        await asyncio.wait_for(asyncio.sleep(0.01), 5)
    asyncio.run(amain())

    signal.signal(signal.SIGALRM, lambda *a: None)
    signal.setitimer(signal.ITIMER_REAL, 0.01)
    time.sleep(0.05)

    class T(unittest.TestCase):
        def test_ok(self):
            self.assertEqual(1 + 1, 2)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(T)
    res = unittest.TextTestRunner(stream=io.StringIO()).run(suite)
    assert res.wasSuccessful() and res.testsRun == 1
    print("python-ok")


if __name__ == "__main__":
    main()
`

// corpusGit makes a repository in /work and uses it as a developer does.
const corpusGit = `set -eu
cd /work
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.com GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.com
git config --global maintenance.auto false
git config --global gc.auto 0
git init -q -b main repo
cd repo
printf 'one\n' > f.txt
git add f.txt
git commit -q -m first
printf 'two\n' >> f.txt
git diff | grep -q '^+two$'
git commit -q -am second
git log --oneline | wc -l | grep -qx 2
git diff HEAD~1 --stat | grep -q 'f.txt'
git status --porcelain | wc -l | grep -qx 0
git branch -q topic && git checkout -q topic
git rev-parse HEAD > /dev/null
echo git-ok
`

// TestSeccompCorpus runs real programs in the real sandbox, under the
// default-deny seccomp filter, and requires them to work: what users run
// must not depend on a call the allowlist forgot.
func TestSeccompCorpus(t *testing.T) {
	grants := grantsJSON("single", corpusPrograms, nil)
	for _, c := range []struct {
		name, want string
		argv       []string
	}{
		{"sh", "shell-ok", []string{"sh", "-c", corpusShell}},
		{"dash", "shell-ok", []string{"dash", "-c", corpusShell}},
		{"bash", "shell-ok", []string{"bash", "-c", corpusShell}},
		{"python3", "python-ok", []string{"python3", "corpus.py"}},
		{"git", "git-ok", []string{"sh", "-c", corpusGit}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := sandboxed(t, c.argv, withGrants(t, grants),
				withFiles(map[string]string{"corpus.py": corpusPython}), withInputs("corpus.py"),
				withLimits(func(l *Limits) { l.Wall = 90 * time.Second }))
			r.mustExit(t, 0)
			if strings.TrimSpace(r.stdout) != c.want {
				t.Errorf("stdout %q, want %q\nstderr: %s", r.stdout, c.want, r.stderr)
			}
		})
	}
}

// TestSeccompCorpusEgress fetches a page with python3's urllib through
// the loopback egress proxy (TCP connect to 127.0.0.1:3128, TLS through
// CONNECT) under the filter.
func TestSeccompCorpusEgress(t *testing.T) {
	srv := testServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`import ssl, urllib.request
ctx = ssl._create_unverified_context()
print(urllib.request.urlopen("https://allowed.test:%d/", context=ctx, timeout=20).read().decode(), end="")
`, port)
	r, _ := egressRun(t, srv, `{"host":"allowed.test","proto":"tcp","ports":[PORT,PORT]},{"cidr":"127.0.0.1/32","proto":"tcp","ports":[PORT,PORT]}`, []string{"python3", "-c", script})
	r.mustExit(t, 0)
	if r.stdout != "hello through the proxy\n" {
		t.Errorf("stdout %q\nstderr: %s", r.stdout, r.stderr)
	}
}

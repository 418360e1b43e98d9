package stage

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyFileChecksBoth checks copyFile's two size checks separately, by
// handing it a stat that disagrees with the file: the one on the size
// fstat reported before the copy, and the one on the bytes actually read
// (which is what stops a file that grows while it is copied; making one
// grow on cue is not attempted here).
func TestCopyFileChecksBoth(t *testing.T) {
	p := write(t, t.TempDir(), "f", "0123456789")
	lim := Limits{MaxFileBytes: 8, MaxTotalBytes: 100, MaxFiles: 10}
	for _, tc := range []struct {
		name     string
		statSize int64
		target   error
	}{
		{"fstat said huge", 1 << 40, ErrLimit},        // refused before reading
		{"fstat said small", 4, ErrLimit},             // 10 bytes read > 8
		{"fstat said within, and wrong", 8, ErrLimit}, // 10 bytes read > 8
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var st unix.Stat_t
			if err := unix.Fstat(int(f.Fd()), &st); err != nil {
				t.Fatal(err)
			}
			st.Size = tc.statSize
			b := &budget{lim: lim}
			var n countingWriter
			_, err = b.copyFile(&n, f, &st, "f")
			wantPathErr(t, err, tc.target, "f")
			if tc.statSize > lim.MaxFileBytes && n > 0 {
				t.Errorf("read %d bytes of a file fstat said was too big", n)
			}
			if int64(n) > lim.MaxFileBytes+1 {
				t.Errorf("copied %d bytes, more than the limit and one", n)
			}
		})
	}
	// Within the limit, but not the size fstat reported: refused as changed.
	f, err := os.Open(filepath.Clean(p))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	st.Size = 9
	b := &budget{lim: Limits{MaxFileBytes: 100, MaxTotalBytes: 100, MaxFiles: 10}}
	_, err = b.copyFile(io.Discard, f, &st, "f")
	wantPathErr(t, err, ErrRefused, "f")
	if errors.Is(err, ErrLimit) || b.bytes != 0 {
		t.Errorf("err = %v, bytes counted %d; want a refusal and nothing counted", err, b.bytes)
	}
}

type countingWriter int64

func (w *countingWriter) Write(b []byte) (int, error) {
	*w += countingWriter(len(b))
	return len(b), nil
}

package nvmldl

import (
	"errors"
	"strings"
	"testing"
)

type fakeAPI struct {
	initErr, countErr, energyErr, shutdownErr error
	n                                         int
	mj                                        []uint64
	inits, shutdowns                          int
}

func (f *fakeAPI) Init() error { f.inits++; return f.initErr }
func (f *fakeAPI) DeviceCount() (int, error) {
	return f.n, f.countErr
}
func (f *fakeAPI) TotalEnergy(i int) (uint64, error) {
	if f.energyErr != nil {
		return 0, f.energyErr
	}
	return f.mj[i], nil
}
func (f *fakeAPI) Shutdown() error { f.shutdowns++; return f.shutdownErr }

func serve(t *testing.T, api API, in string) (string, error) {
	t.Helper()
	var out strings.Builder
	err := Serve(api, strings.NewReader(in), &out)
	return out.String(), err
}

func TestServe(t *testing.T) {
	f := &fakeAPI{n: 2, mj: []uint64{7, 1 << 63}}
	out, err := serve(t, f, "init\ncount\nenergy 0\nenergy 1\nshutdown\nenergy 0\n")
	if want := "ok\nok 2\nok 7\nok 9223372036854775808\nok\n"; out != want || err != nil {
		t.Fatalf("Serve = %q, %v; want %q (nothing after shutdown)", out, err, want)
	}
	if f.inits != 1 || f.shutdowns != 1 {
		t.Fatalf("inits %d, shutdowns %d", f.inits, f.shutdowns)
	}
	// The end of input shuts NVML down once.
	f = &fakeAPI{n: 1, mj: []uint64{1}}
	if out, err := serve(t, f, "init\n"); out != "ok\n" || err != nil || f.shutdowns != 1 {
		t.Fatalf("EOF after init: %q, %v, %d shutdowns", out, err, f.shutdowns)
	}
}

func TestServeRefuses(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		api            *fakeAPI
		ends           bool
	}{
		{"count before init", "count\n", "err count before init\n", &fakeAPI{n: 1}, false},
		{"energy before count", "init\nenergy 0\n", "ok\nerr energy: device 0 is not one of the 0 counted\n", &fakeAPI{n: 1, mj: []uint64{1}}, false},
		{"device out of range", "init\ncount\nenergy 1\n", "ok\nok 1\nerr energy: device 1 is not one of the 1 counted\n", &fakeAPI{n: 1, mj: []uint64{1}}, false},
		{"negative device", "init\ncount\nenergy -1\n", "ok\nok 1\nerr energy: device -1 is not one of the 1 counted\n", &fakeAPI{n: 1, mj: []uint64{1}}, false},
		{"not a number", "init\ncount\nenergy 01\n", "ok\nok 1\nerr energy: not a device index\n", &fakeAPI{n: 1, mj: []uint64{1}}, false},
		{"too many devices", "init\ncount\n", "ok\nerr NVML reports 5000 devices\n", &fakeAPI{n: 5000}, false},
		{"init fails", "init\ncount\n", "err no driver\nerr count before init\n", &fakeAPI{initErr: errors.New("no driver")}, false},
		{"energy fails, one line", "init\ncount\nenergy 0\n", "ok\nok 1\nerr Not\x3f Supported ?\n", &fakeAPI{n: 1, energyErr: errors.New("Not\x00 Supported \xff")}, false},
		{"unknown request", "init\nhello\ncount\n", "ok\nerr unknown request\n", &fakeAPI{n: 1}, true},
		{"a line too long", strings.Repeat("x", MaxLine+1) + "\n", "err a request line over 256 bytes\n", &fakeAPI{}, true},
		{"no newline", "init", "", &fakeAPI{}, true},
	} {
		out, err := serve(t, c.api, c.in)
		if out != c.want || (err != nil) != c.ends {
			t.Errorf("%s: Serve = %q, %v; want %q (ends with an error: %v)", c.name, out, err, c.want, c.ends)
		}
	}
}

package cgroup

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []mount
		wantErr  bool
	}{
		{
			name: "v1 and v2",
			in: "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
				"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:4 master:2 - cgroup2 cgroup2 rw,nsdelegate\n",
			want: []mount{
				{root: "/", point: "/sys/fs/cgroup/cpu", fstype: "cgroup", super: []string{"rw", "cpu"}},
				{root: "/", point: "/sys/fs/cgroup/unified", fstype: "cgroup2", super: []string{"rw", "nsdelegate"}},
			},
		},
		{
			name: "escaped space and backslash",
			in:   `1 0 0:1 /a\040b /mnt/x\134y rw - cgroup2 cgroup2 rw` + "\n",
			want: []mount{{root: "/a b", point: `/mnt/x\y`, fstype: "cgroup2", super: []string{"rw"}}},
		},
		{name: "empty", in: "", want: nil},
		{name: "no separator", in: "1 0 0:1 / / rw cgroup2 cgroup2 rw\n", wantErr: true},
		{name: "too few after separator", in: "1 0 0:1 / / rw - cgroup2 cgroup2\n", wantErr: true},
		{name: "too many after separator", in: "1 0 0:1 / / rw - cgroup2 cgroup2 rw extra\n", wantErr: true},
		{name: "short escape", in: `1 0 0:1 /a\04 / rw - cgroup2 cgroup2 rw` + "\n", wantErr: true},
		{name: "bad escape", in: `1 0 0:1 /a\09x / rw - cgroup2 cgroup2 rw` + "\n", wantErr: true},
		{name: "escape above a byte", in: `1 0 0:1 /a\777 / rw - cgroup2 cgroup2 rw` + "\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMountinfo([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseMountinfo(%q) error = %v, want error: %v", tc.in, err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseMountinfo(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseProcCgroup(t *testing.T) {
	got, err := parseProcCgroup([]byte("9:name=systemd:/\n4:memory:/a/b\n2:cpu,cpuacct:/x:y\n0::/\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []procCgroup{
		{id: 9, controllers: []string{"name=systemd"}, path: "/"},
		{id: 4, controllers: []string{"memory"}, path: "/a/b"},
		{id: 2, controllers: []string{"cpu", "cpuacct"}, path: "/x:y"},
		{id: 0, controllers: nil, path: "/"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseProcCgroup = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"x:memory:/\n", "-1:memory:/\n", "4:memory\n", "4:memory:relative\n"} {
		if _, err := parseProcCgroup([]byte(bad)); !errors.Is(err, errFormat) {
			t.Errorf("parseProcCgroup(%q) = %v, want errFormat", bad, err)
		}
	}
}

func TestParseKeyed(t *testing.T) {
	const events = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\n"
	for _, tc := range []struct {
		in, key   string
		v         int64
		found, ok bool
	}{
		{events, "oom_kill", 2, true, true},
		{events, "oom", 3, true, true},
		{events, "absent", 0, false, true},
		{"usage_usec 1234\nuser_usec 1000\n", "usage_usec", 1234, true, true},
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", "oom_kill", 7, true, true},
		{"", "x", 0, false, true},
		{"a 1\na 2\n", "a", 0, false, false}, // a key twice
		{"a 1 2\n", "b", 0, false, false},    // three fields
		{"a -1\n", "a", 0, false, false},     // negative
		{"a max\n", "a", 0, false, false},    // not a number
		{"a 1\n\nb 2\n", "b", 2, true, true}, // blank lines pass
		{"a 99999999999999999999\n", "a", 0, false, false},
	} {
		v, found, err := parseKeyed([]byte(tc.in), tc.key)
		if v != tc.v || found != tc.found || (err == nil) != tc.ok {
			t.Errorf("parseKeyed(%q, %q) = %d, %v, %v; want %d, %v, ok %v", tc.in, tc.key, v, found, err, tc.v, tc.found, tc.ok)
		}
	}
}

func TestParseIntAndPIDs(t *testing.T) {
	if v, err := parseInt([]byte("268435456\n")); v != 268435456 || err != nil {
		t.Errorf("parseInt = %d, %v", v, err)
	}
	for _, bad := range []string{"", "max\n", "-1\n", " 1\n", "1\n\n"} {
		if _, err := parseInt([]byte(bad)); err == nil {
			t.Errorf("parseInt(%q) succeeded", bad)
		}
	}
	if got, err := parsePIDs([]byte("12\n7\n")); err != nil || !reflect.DeepEqual(got, []int{12, 7}) {
		t.Errorf("parsePIDs = %v, %v", got, err)
	}
	if got, err := parsePIDs(nil); err != nil || got != nil {
		t.Errorf("parsePIDs(empty) = %v, %v", got, err)
	}
	for _, bad := range []string{"0\n", "x\n", "-3\n"} {
		if _, err := parsePIDs([]byte(bad)); err == nil {
			t.Errorf("parsePIDs(%q) succeeded", bad)
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add("32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n")
	f.Add(`1 0 0:1 /a\040b /mnt rw shared:1 - cgroup2 cgroup2 rw` + "\n")
	f.Fuzz(func(t *testing.T, in string) {
		ms, err := parseMountinfo([]byte(in))
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.fstype == "" && !strings.Contains(in, " -  ") {
				t.Errorf("empty fstype parsed from %q", in)
			}
		}
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add("9:name=systemd:/\n4:memory:/a/b\n0::/\n")
	f.Fuzz(func(t *testing.T, in string) {
		cs, err := parseProcCgroup([]byte(in))
		if err != nil {
			return
		}
		for _, c := range cs {
			if !strings.HasPrefix(c.path, "/") || c.id < 0 {
				t.Errorf("parseProcCgroup(%q) gave %+v", in, c)
			}
		}
	})
}

func FuzzParseKeyed(f *testing.F) {
	f.Add("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\n", "oom_kill")
	f.Fuzz(func(t *testing.T, in, key string) {
		v, found, err := parseKeyed([]byte(in), key)
		if err == nil && (v < 0 || !found && v != 0) {
			t.Errorf("parseKeyed(%q, %q) = %d, %v", in, key, v, found)
		}
	})
}

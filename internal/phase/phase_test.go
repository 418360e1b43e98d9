package phase

import "testing"

func TestMarks(t *testing.T) {
	Add("off") // not recorded: recording is off
	if len(Marks()) != 0 {
		t.Fatalf("a mark was recorded while recording was off: %v", Marks())
	}
	Enable()
	Add("a")
	AddAt("b", 7)
	got := Marks()
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" || got[1].T != 7 {
		t.Fatalf("Marks() = %v, want a then b at 7", got)
	}
	if got[0].T <= 0 {
		t.Fatalf("mark a at %d: the clock did not read", got[0].T)
	}
}

func TestResetDisableBound(t *testing.T) {
	Enable()
	Reset()
	for i := range MaxMarks + 10 {
		AddAt("m", int64(i))
	}
	if n := len(Marks()); n != MaxMarks {
		t.Fatalf("%d marks kept, want at most %d", n, MaxMarks)
	}
	Reset()
	if n := len(Marks()); n != 0 {
		t.Fatalf("%d marks after Reset", n)
	}
	Disable()
	Add("off")
	if Enabled() || len(Marks()) != 0 {
		t.Fatalf("recording after Disable: %v", Marks())
	}
}

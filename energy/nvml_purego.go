//go:build linux

package energy

import (
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
)

// realNVML binds nvmlAPI to libnvidia-ml.so.1, opened with dlopen at run
// time (without cgo, through purego): a host without the library or a GPU
// gets ErrUnavailable, never a crash or a zero.
type realNVML struct {
	init     func() int32
	shutdown func() int32
	count    func(*uint32) int32
	handle   func(uint32, *uintptr) int32
	energy   func(uintptr, *uint64) int32
	errstr   func(int32) string
	devs     []uintptr
}

const nvmlLibrary = "libnvidia-ml.so.1"

var (
	nvmlOnce sync.Once
	nvmlLib  *realNVML
	nvmlErr  error
)

func loadNVML() nvmlAPI {
	nvmlOnce.Do(func() {
		h, err := purego.Dlopen(nvmlLibrary, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			nvmlErr = err // purego names the library
			return
		}
		r := &realNVML{}
		for _, f := range []struct {
			ptr  any
			name string
		}{
			{&r.init, "nvmlInit_v2"}, {&r.shutdown, "nvmlShutdown"}, {&r.count, "nvmlDeviceGetCount_v2"},
			{&r.handle, "nvmlDeviceGetHandleByIndex_v2"}, {&r.energy, "nvmlDeviceGetTotalEnergyConsumption"},
			{&r.errstr, "nvmlErrorString"},
		} {
			sym, err := purego.Dlsym(h, f.name)
			if err != nil {
				nvmlErr = fmt.Errorf("%s: %s: %v", nvmlLibrary, f.name, err)
				return
			}
			purego.RegisterFunc(f.ptr, sym)
		}
		nvmlLib = r
	})
	if nvmlErr != nil {
		return unavailableNVML{nvmlErr}
	}
	return nvmlLib
}

func (r *realNVML) check(what string, ret int32) error {
	if ret == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (NVML error %d)", what, r.errstr(ret), ret)
}

func (r *realNVML) Init() error { return r.check("nvmlInit", r.init()) }

func (r *realNVML) DeviceCount() (int, error) {
	var n uint32
	if err := r.check("nvmlDeviceGetCount", r.count(&n)); err != nil {
		return 0, err
	}
	r.devs = make([]uintptr, n)
	for i := range r.devs {
		if err := r.check(fmt.Sprintf("nvmlDeviceGetHandleByIndex(%d)", i), r.handle(uint32(i), &r.devs[i])); err != nil {
			return 0, err
		}
	}
	return int(n), nil
}

func (r *realNVML) TotalEnergy(i int) (uint64, error) {
	var mj uint64
	if err := r.check("nvmlDeviceGetTotalEnergyConsumption", r.energy(r.devs[i], &mj)); err != nil {
		return 0, err
	}
	return mj, nil
}

func (r *realNVML) Shutdown() error { return r.check("nvmlShutdown", r.shutdown()) }

// unavailableNVML reports why the library could not be opened.
type unavailableNVML struct{ err error }

func (u unavailableNVML) Init() error                     { return u.err }
func (u unavailableNVML) DeviceCount() (int, error)       { return 0, u.err }
func (u unavailableNVML) TotalEnergy(int) (uint64, error) { return 0, u.err }
func (u unavailableNVML) Shutdown() error                 { return nil }

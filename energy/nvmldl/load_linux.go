//go:build linux

package nvmldl

import (
	"fmt"

	"github.com/ebitengine/purego"
)

// realNVML binds API to libnvidia-ml.so.1, opened with dlopen (without
// cgo, through purego).
type realNVML struct {
	init     func() int32
	shutdown func() int32
	count    func(*uint32) int32
	handle   func(uint32, *uintptr) int32
	energy   func(uintptr, *uint64) int32
	errstr   func(int32) string
	devs     []uintptr
}

// Load opens Library and binds its functions. A library or a function
// that is missing gives an API whose every call fails with why.
func Load() API {
	h, err := purego.Dlopen(Library, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return unavailable{err} // purego names the library
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
			return unavailable{fmt.Errorf("%s: %s: %v", Library, f.name, err)}
		}
		purego.RegisterFunc(f.ptr, sym)
	}
	return r
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
	if n > MaxDevices {
		return 0, fmt.Errorf("nvmlDeviceGetCount: %d devices", n)
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
	if i < 0 || i >= len(r.devs) {
		return 0, fmt.Errorf("device %d is not one of the %d counted", i, len(r.devs))
	}
	var mj uint64
	if err := r.check("nvmlDeviceGetTotalEnergyConsumption", r.energy(r.devs[i], &mj)); err != nil {
		return 0, err
	}
	return mj, nil
}

func (r *realNVML) Shutdown() error { return r.check("nvmlShutdown", r.shutdown()) }

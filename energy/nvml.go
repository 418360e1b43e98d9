package energy

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// nvmlAPI is the part of NVML cordon uses; nvml_helper_linux.go binds it
// to the NVML helper (cmd/cordon-nvml, which opens the real library),
// tests to a fake.
type nvmlAPI interface {
	Init() error
	DeviceCount() (int, error)
	// TotalEnergy returns a device's energy counter in millijoules since
	// the driver loaded (nvmlDeviceGetTotalEnergyConsumption).
	TotalEnergy(i int) (uint64, error)
	Shutdown() error
}

// NVML meters every NVIDIA GPU of the host through NVML.
type NVML struct {
	api     nvmlAPI
	devices int
}

// NewNVML opens NVML's devices through the NVML helper, NVMLHelper next
// to cordon's executable, which loads the library at run time. It fails
// with ErrUnavailable when the helper, the library, a device or the
// energy counter is missing — never by reporting zero.
//
// Opening stops when ctx ends (the helper is killed and the meter is
// unavailable); once it has returned, ctx no longer matters: a run
// interrupted after its meters were opened still reads them for its seal.
func NewNVML(ctx context.Context) (*NVML, error) {
	api := loadNVML()
	if i, ok := api.(interruptible); ok {
		var done sync.WaitGroup
		done.Add(1)
		stop := context.AfterFunc(ctx, func() {
			defer done.Done()
			i.interrupt()
		})
		defer func() {
			if !stop() {
				done.Wait() // it ran, or runs now: let it finish before the reset
			}
			i.reset()
		}()
	}
	if err := ctx.Err(); err != nil {
		api.Shutdown()
		return nil, fmt.Errorf("%w: NVML: %v", ErrUnavailable, err)
	}
	return newNVML(api)
}

// interruptible is an nvmlAPI whose calls can be cut short (the helper's):
// interrupt makes a call in progress, and every call until reset, fail.
type interruptible interface {
	interrupt()
	reset()
}

func newNVML(api nvmlAPI) (*NVML, error) {
	if api == nil {
		return nil, fmt.Errorf("%w: NVML is loaded on Linux only", ErrUnavailable)
	}
	if err := api.Init(); err != nil {
		return nil, fmt.Errorf("%w: NVML: %v", ErrUnavailable, err)
	}
	n, err := api.DeviceCount()
	if err != nil {
		api.Shutdown()
		return nil, fmt.Errorf("%w: NVML: %v", ErrUnavailable, err)
	}
	if n == 0 {
		api.Shutdown()
		return nil, fmt.Errorf("%w: NVML: no GPU", ErrUnavailable)
	}
	m := &NVML{api: api, devices: n}
	if _, err := m.Read(); err != nil {
		api.Shutdown()
		return nil, err
	}
	return m, nil
}

// Close releases NVML.
func (m *NVML) Close() error { return m.api.Shutdown() }

// Class implements Meter.
func (m *NVML) Class() string { return "gpu" }

// Devices returns how many GPUs are metered.
func (m *NVML) Devices() int { return m.devices }

// Read implements Meter: each device's counter in µJ.
func (m *NVML) Read() (Counter, error) {
	c := Counter{Values: make([]uint64, m.devices)}
	for i := range m.devices {
		mj, err := m.api.TotalEnergy(i)
		if err != nil {
			return Counter{}, fmt.Errorf("%w: NVML device %d: %v", ErrUnavailable, i, err)
		}
		if mj > (1<<64-1)/1000 {
			return Counter{}, fmt.Errorf("NVML device %d: counter %d mJ overflows µJ", i, mj)
		}
		c.Values[i] = mj * 1000
	}
	return c, nil
}

// Delta implements Meter. NVML's counters are 64-bit and never wrap; a
// counter that went backwards (a driver reload) is an error.
func (m *NVML) Delta(start, end Counter) (uint64, error) {
	if len(start.Values) != m.devices || len(end.Values) != m.devices {
		return 0, errors.New("NVML: readings of another set of devices")
	}
	var total uint64
	for i := range start.Values {
		if end.Values[i] < start.Values[i] {
			return 0, fmt.Errorf("NVML device %d: counter went backwards (driver reloaded?)", i)
		}
		total += end.Values[i] - start.Values[i]
	}
	return total, nil
}

// unavailableNVML reports why NVML cannot be read.
type unavailableNVML struct{ err error }

func (u unavailableNVML) Init() error                     { return u.err }
func (u unavailableNVML) DeviceCount() (int, error)       { return 0, u.err }
func (u unavailableNVML) TotalEnergy(int) (uint64, error) { return 0, u.err }
func (u unavailableNVML) Shutdown() error                 { return nil }

// Package nvmldl is the NVML helper's side of cordon's GPU meter: it opens
// NVIDIA's management library (libnvidia-ml.so.1) with dlopen, without
// cgo, and answers the meter's requests over a line protocol.
//
// It runs in its own process, cmd/cordon-nvml, and never inside cordon:
// opening a shared library from Go needs a dynamically linked binary
// (github.com/ebitengine/purego links libc's dlopen), and a dynamically
// linked cordon pays about 0.8 ms more at every process start, twice in
// a cold `cordon exec` (docs/PERFORMANCE.md). cordon itself is static and
// starts this helper only for a run whose grant set uses a GPU
// (energy.NewNVML).
//
// The protocol: the meter writes one request a line, the helper answers
// each with one line, "ok", "ok N" (a decimal) or "err MESSAGE":
//
//	init        nvmlInit_v2
//	count       nvmlDeviceGetCount_v2 and each device's handle: "ok N"
//	energy I    device I's nvmlDeviceGetTotalEnergyConsumption, in mJ: "ok MJ"
//	shutdown    nvmlShutdown; the helper then exits
//
// Anything else, a line over MaxLine bytes, or a request out of order
// (energy before count, a device out of range) is answered "err …"; an
// unknown request also ends the helper. End of input ends it too (after
// nvmlShutdown if it was initialised).
package nvmldl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// API is the part of NVML the meter uses.
type API interface {
	Init() error
	DeviceCount() (int, error)
	// TotalEnergy is device i's energy counter in millijoules since the
	// driver loaded.
	TotalEnergy(i int) (uint64, error)
	Shutdown() error
}

// MaxLine is the longest request or answer line, without its newline.
const MaxLine = 256

// MaxDevices bounds the device count a helper reports.
const MaxDevices = 1024

// Library is the shared library Load opens.
const Library = "libnvidia-ml.so.1"

// Serve answers requests read from in on out until a shutdown, an
// unknown request, or the end of in. It returns nil after a shutdown or
// at the end of in, else what ended it.
func Serve(api API, in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, MaxLine+1)
	w := bufio.NewWriter(out)
	answer := func(s string) error {
		if _, err := w.WriteString(s + "\n"); err != nil {
			return err
		}
		return w.Flush()
	}
	fail := func(err error) error { return answer("err " + OneLine(err.Error())) }
	initialised, devices := false, -1
	defer func() {
		if initialised {
			api.Shutdown()
		}
	}()
	for {
		line, err := r.ReadSlice('\n')
		if err == io.EOF && len(line) == 0 {
			return nil
		}
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				answer("err a request line over " + strconv.Itoa(MaxLine) + " bytes")
			}
			return fmt.Errorf("reading a request: %w", err)
		}
		req := string(line[:len(line)-1])
		switch {
		case req == "init":
			var err error
			if e := api.Init(); e != nil {
				err = fail(e)
			} else {
				initialised = true
				err = answer("ok")
			}
			if err != nil {
				return err
			}
		case req == "count":
			var n int
			var err error
			if initialised {
				n, err = api.DeviceCount()
			}
			switch {
			case !initialised:
				err = fail(errors.New("count before init"))
			case err != nil:
				err = fail(err)
			case n < 0 || n > MaxDevices:
				err = fail(fmt.Errorf("NVML reports %d devices", n))
			default:
				devices = n
				err = answer("ok " + strconv.Itoa(n))
			}
			if err != nil {
				return err
			}
		case strings.HasPrefix(req, "energy "):
			i, perr := strconv.Atoi(req[len("energy "):])
			var err error
			switch {
			case perr != nil || strconv.Itoa(i) != req[len("energy "):]:
				err = fail(errors.New("energy: not a device index"))
			case i < 0 || i >= devices:
				err = fail(fmt.Errorf("energy: device %d is not one of the %d counted", i, max(devices, 0)))
			default:
				mj, e := api.TotalEnergy(i)
				if e != nil {
					err = fail(e)
				} else {
					err = answer("ok " + strconv.FormatUint(mj, 10))
				}
			}
			if err != nil {
				return err
			}
		case req == "shutdown":
			if !initialised {
				return answer("ok")
			}
			initialised = false
			if err := api.Shutdown(); err != nil {
				return fail(err)
			}
			return answer("ok")
		default:
			fail(errors.New("unknown request"))
			return fmt.Errorf("unknown request %q", OneLine(req))
		}
	}
}

// OneLine makes s one line of printable ASCII of at most 200 bytes: the
// rest as '?', newlines as spaces.
func OneLine(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case c == '\n' || c == '\r' || c == '\t':
			b[i] = ' '
		case c < 0x20 || c > 0x7e:
			b[i] = '?'
		}
	}
	return string(b)
}

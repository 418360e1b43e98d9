// Command cordon-nvml is cordon's NVML helper: it opens NVIDIA's
// management library and answers the GPU meter's requests on its
// standard input and output (package energy/nvmldl has the protocol).
//
// cordon starts it, from the directory of its own executable, only for a
// run whose grant set uses a GPU; it is not meant to be run by hand. It
// is a separate program because opening a shared library needs a
// dynamically linked binary, and cordon is static (docs/SPEC.md, "NVML").
// Install it next to cordon:
//
//	CGO_ENABLED=0 go build -o DIR ./cmd/cordon ./cmd/cordon-nvml
package main

import (
	"fmt"
	"os"

	"github.com/cordon-dev/cordon/energy/nvmldl"
)

func main() {
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "cordon-nvml: takes no arguments: cordon starts it to read NVIDIA GPUs' energy counters (docs/SPEC.md, \"NVML\")")
		os.Exit(2)
	}
	if err := nvmldl.Isolate(); err != nil {
		fmt.Fprintln(os.Stderr, "cordon-nvml: "+nvmldl.OneLine(err.Error()))
		os.Exit(1)
	}
	if err := nvmldl.Serve(nvmldl.Load(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cordon-nvml: "+nvmldl.OneLine(err.Error()))
		os.Exit(1)
	}
}

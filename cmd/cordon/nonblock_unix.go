//go:build unix

package main

import "syscall"

const oNonblock = syscall.O_NONBLOCK

//go:build !unix

package main

const oNonblock = 0

//go:build !linux

package ackcore_test

// threadCPU is not available here.
func threadCPU() (int64, bool) { return 0, false }

//go:build unix

package main

import "golang.org/x/sys/unix"

// unmap removes the shared rows region from the plugin's memory.
func unmap(region []byte) { unix.Munmap(region) }

package main

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// TestMain runs the test binary as an insert child when the latency mode's
// leasehold-xproc engine starts it (os.Executable is the test binary here).
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := runInsertChild(context.Background(), spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench insert child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

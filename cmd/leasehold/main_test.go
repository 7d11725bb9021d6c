package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// runMainEnv, set to 1 in a child process's environment, makes the test
// binary run the command line instead of the tests, so that tests can start
// real leasehold processes without building the binary.
const runMainEnv = "LEASEHOLD_TEST_RUN_MAIN"

// TestMain fails the package's tests when a goroutine is still running after
// the last of them: whatever a test starts, it stops.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

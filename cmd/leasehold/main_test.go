package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine is still running after
// the last of them: whatever a test starts, it stops.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

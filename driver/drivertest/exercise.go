package drivertest

import "testing"

// Exercise runs the whole conformance suite against a backend. Every test
// gets its own database from b.New and runs in parallel with the others.
func Exercise[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()
	exerciseDriver(t, b)
}

// exerciseDriver specifies the driver contract method by method.
func exerciseDriver[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()
}

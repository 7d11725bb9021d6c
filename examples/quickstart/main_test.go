package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The program writes quickstart.db where it runs: a directory of its own.
	dir, err := os.MkdirTemp("", "leasehold-quickstart-")
	if err != nil {
		panic(err)
	}
	wd, _ := os.Getwd()
	readme, err := os.ReadFile(filepath.Join(wd, "..", "..", "README.md"))
	if err != nil {
		panic(err)
	}
	source, err := os.ReadFile(filepath.Join(wd, "main.go"))
	if err != nil {
		panic(err)
	}
	readmeGo, sourceGo = readme, source
	if err := os.Chdir(dir); err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	goleak.VerifyTestMain(m)
}

var readmeGo, sourceGo []byte

// The README's "Use it" program runs and shows its job completing.
func Example_main() {
	main()
	// Output:
	// charging payment 42 (key payment-42)
	// job 1 completed after 1 attempt(s); payment 42 succeeded
}

// TestReadmeShowsThisProgram: the README's first Go block is this file, so
// the program a newcomer copies is the one this package tests.
func TestReadmeShowsThisProgram(t *testing.T) {
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readmeGo)
	if m == nil {
		t.Fatal("README.md has no Go block")
	}
	if !bytes.Equal(m[1], sourceGo) {
		t.Fatal("README.md's first Go block differs from examples/quickstart/main.go: copy the file into the README")
	}
}

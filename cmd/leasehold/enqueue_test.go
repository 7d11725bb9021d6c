package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnqueueArgsFromFileAndStdin: --args takes @FILE and - (standard
// input), for payloads larger than one command-line argument may be.
func TestEnqueueArgsFromFileAndStdin(t *testing.T) {
	t.Parallel()
	b := migrated(t, newSQLiteBackend(t))
	big := `{"note":"` + strings.Repeat("x", 200<<10) + `"}` // over Linux's 128 KiB per argument
	path := filepath.Join(t.TempDir(), "args.json")
	if err := os.WriteFile(path, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	job := b.enqueue(t, "--kind", "file", "--args", "@"+path)
	if got := b.job(t, job.ID); len(got.EncodedArgs) < 200<<10 {
		t.Fatalf("args from @file stored %d bytes", len(got.EncodedArgs))
	}

	cmd := newRootCmd()
	var out, errOut syncBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(`{"from":"stdin"}`))
	cmd.SetArgs([]string{"enqueue", "--database-url", b.url, "--kind", "stdin", "--args", "-", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("enqueue --args -: %v (%s)", err, errOut.String())
	}
	if !strings.Contains(out.String(), `"from": "stdin"`) {
		t.Fatalf("enqueue --args - printed %s", out.String())
	}

	if r := b.run(t, "enqueue", "--kind", "missing", "--args", "@"+filepath.Join(t.TempDir(), "nope.json")); r.err == nil || !strings.Contains(r.err.Error(), "nope.json") {
		t.Fatalf("enqueue --args @missing: %v, want an error naming the file", r.err)
	}
}

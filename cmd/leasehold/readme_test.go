package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBlocks returns the README's shell command blocks.
func readmeBlocks(t *testing.T) [][]string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(m[1]), "\n") {
			if cmd, _, _ := strings.Cut(l, " #"); strings.TrimSpace(cmd) != "" {
				lines = append(lines, strings.TrimSpace(cmd))
			}
		}
		blocks = append(blocks, lines)
	}
	return blocks
}

// shellWords splits a command line as the shell would for the README's
// commands: words, and single- or double-quoted strings.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case ' ', '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case '\'', '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				end = len(line) - i - 1
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestReadmeCommands runs the README's "Operate it" commands as written,
// in order, on a fresh SQLite file, and accounts for every other command
// block: a new block fails this test until it is run here or named with
// the test that runs it.
func TestReadmeCommands(t *testing.T) {
	elsewhere := map[string]string{
		"go run ./cmd/leasehold demo":                  "TestDemoJSON and the demo tests run the demo; scripts/test.sh is what CI runs",
		"go get github.com/leasehold/leasehold@latest": "the install commands: checked below against go.mod",
		"leasehold demo --database-url 'postgres://app@127.0.0.1:6432/app?sslmode=disable&default_query_exec_mode=exec'": "TestDemoThroughPgBouncer",
	}
	var operate []string
	for _, b := range readmeBlocks(t) {
		switch {
		case strings.HasPrefix(b[0], "export LEASEHOLD_DATABASE_URL="):
			operate = b
		case elsewhere[b[0]] != "":
		default:
			t.Errorf("README command block starting %q is run by no test: run it in TestReadmeCommands or name the test that does", b[0])
		}
	}
	if operate == nil {
		t.Fatal(`README has no "Operate it" block starting with export LEASEHOLD_DATABASE_URL=`)
	}

	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil || !strings.HasPrefix(string(gomod), "module github.com/leasehold/leasehold\n") {
		t.Fatalf("the install commands name github.com/leasehold/leasehold, go.mod says %.60q", gomod)
	}

	dir := t.TempDir()
	for _, line := range operate {
		words := shellWords(line)
		if words[0] == "export" {
			name, value, _ := strings.Cut(words[1], "=")
			if value == "sqlite:app.db" {
				value = "sqlite:" + filepath.Join(dir, "app.db")
			}
			t.Setenv(name, value)
			continue
		}
		if words[0] != "leasehold" {
			t.Fatalf("README line %q: not a leasehold command", line)
		}
		args := words[1:]
		if args[0] == "serve" {
			readmeServe(t, args)
			continue
		}
		var out, errOut syncBuffer
		if err := runTree(context.Background(), &out, &errOut, args...); err != nil {
			t.Fatalf("README line %q failed: %v\n%s%s", line, err, out.String(), errOut.String())
		}
	}
}

// readmeServe runs serve as the README writes it (on a free port when the
// README's is taken), checks /healthz and stops it as Ctrl-C would.
func readmeServe(t *testing.T, args []string) {
	t.Helper()
	for i, a := range args {
		if a == "127.0.0.1:8080" {
			args[i] = "127.0.0.1:0"
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- runTree(ctx, &out, &errOut, args...) }()
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; {
		if m := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(out.String()); m != "" {
			base = m
		} else if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not start: %s%s", out.String(), errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz of the README's serve = %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve stopped with %v", err)
	}
}

func TestShellWords(t *testing.T) {
	t.Parallel()
	got := shellWords(`leasehold enqueue --kind charge --args '{"payment_id":42}' --note "a b"`)
	want := []string{"leasehold", "enqueue", "--kind", "charge", "--args", `{"payment_id":42}`, "--note", "a b"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("shellWords = %q, want %q", got, want)
	}
}

// TestReadmeSchemaListsEveryTable: the README's schema table names every
// table the migrations create.
func TestReadmeSchemaListsEveryTable(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, schema, _ := strings.Cut(string(readme), "## Schema")
	files, err := filepath.Glob(filepath.Join("..", "..", "postgres", "migrations", "*.up.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	tables := map[string]bool{"leasehold_migration": true}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`CREATE TABLE (?:IF NOT EXISTS )?(leasehold_\w+)`).FindAllStringSubmatch(string(b), -1) {
			tables[m[1]] = true
		}
	}
	for table := range tables {
		if !strings.Contains(schema, "`"+table+"`") {
			t.Errorf("README's Schema section does not list %s", table)
		}
	}
}

package driver

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestMigrationsFromFSCompatibleWith(t *testing.T) {
	files := func(up2 string) fstest.MapFS {
		return fstest.MapFS{
			"001_a.up.sql":   {Data: []byte("CREATE TABLE a (id int);")},
			"001_a.down.sql": {Data: []byte("DROP TABLE a;")},
			"002_b.up.sql":   {Data: []byte(up2)},
			"002_b.down.sql": {Data: []byte("DROP TABLE b;")},
		}
	}
	cases := []struct {
		name string
		up   string
		want int
		err  string
	}{
		{name: "none", up: "CREATE TABLE b (id int);", want: 0},
		{name: "header", up: "-- Version 2: b.\n--\n-- leasehold:compatible-with 1\nCREATE TABLE b (id int);", want: 1},
		{name: "blank lines first", up: "\n\n-- leasehold:compatible-with 1\nCREATE TABLE b (id int);", want: 1},
		{name: "after the first statement is not a header", up: "CREATE TABLE b (id int);\n-- leasehold:compatible-with 1\n", want: 0},
		{name: "not a number", up: "-- leasehold:compatible-with one\nSELECT 1;", err: "want a version of 1 or more"},
		{name: "zero", up: "-- leasehold:compatible-with 0\nSELECT 1;", err: "want a version of 1 or more"},
		{name: "itself", up: "-- leasehold:compatible-with 2\nSELECT 1;", err: "must name an older version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := MigrationsFromFS(files(tc.up))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "2_b") {
					t.Fatalf("err = %v, want one naming migration 2_b and containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ms[1].CompatibleWith(); got != tc.want {
				t.Errorf("CompatibleWith = %d, want %d", got, tc.want)
			}
			if got := ms[0].CompatibleWith(); got != 0 {
				t.Errorf("migration 1 CompatibleWith = %d, want 0", got)
			}
		})
	}
}

package leasehold

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/driver"
)

func schemaVerdictCases() []struct {
	name         string
	st           driver.MigrationState
	err          error // nil: allowed
	message      string
	warning      string
	missing      []int
	incompatible []int
} {
	applied := func(vs ...int) []driver.AppliedMigration {
		out := make([]driver.AppliedMigration, len(vs))
		for i, v := range vs {
			out[i] = driver.AppliedMigration{Version: v}
		}
		return out
	}
	newer := func(v, compatibleWith int) driver.AppliedMigration {
		return driver.AppliedMigration{Version: v, CompatibleWith: compatibleWith}
	}
	return []struct {
		name         string
		st           driver.MigrationState
		err          error
		message      string
		warning      string
		missing      []int
		incompatible []int
	}{
		{name: "current", st: driver.MigrationState{Recorded: true, JobTable: true, Applied: applied(1, 2, 3, 4)}},
		{name: "one behind", st: driver.MigrationState{Recorded: true, JobTable: true, Applied: applied(1, 2, 3)},
			err: ErrSchemaOutdated, missing: []int{4},
			message: "leasehold: schema at version 3, this binary needs 4: run `leasehold migrate up`"},
		{name: "empty database", st: driver.MigrationState{},
			err: ErrSchemaOutdated, missing: []int{1, 2, 3, 4},
			message: "leasehold: schema at version 0, this binary needs 4: run `leasehold migrate up`"},
		{name: "gap", st: driver.MigrationState{Recorded: true, JobTable: true, Applied: applied(1, 2, 4)},
			err: ErrSchemaOutdated, missing: []int{3}, message: "schema lacks migration 3"},
		{name: "newer undeclared", st: driver.MigrationState{Recorded: true, JobTable: true, Applied: append(applied(1, 2, 3, 4), newer(5, 0))},
			err: ErrSchemaTooNew, incompatible: []int{5},
			message: "leasehold: schema at version 5, this binary knows up to 4 and migration 5 is not declared compatible with it"},
		{name: "newer compatible", st: driver.MigrationState{Recorded: true, JobTable: true, Applied: append(applied(1, 2, 3, 4), newer(5, 4), newer(6, 3))},
			warning: "schema at version 6 is newer than this binary (4); migration 5, 6 declared compatible"},
		{name: "newer, one too far", st: driver.MigrationState{Recorded: true, JobTable: true, Applied: append(applied(1, 2, 3, 4), newer(5, 4), newer(6, 5))},
			err: ErrSchemaTooNew, incompatible: []int{6}},
		{name: "tables without bookkeeping", st: driver.MigrationState{JobTable: true},
			warning: "no leasehold_migration bookkeeping"},
	}
}

func TestSchemaVerdict(t *testing.T) {
	known := []driver.Migration{{Version: 1}, {Version: 2}, {Version: 3}, {Version: 4}}
	for _, tc := range schemaVerdictCases() {
		t.Run(tc.name, func(t *testing.T) {
			warning, err := schemaVerdict(known, &tc.st)
			if tc.err == nil {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
			} else {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want one matching %v", err, tc.err)
				}
				other := ErrSchemaTooNew
				if tc.err == ErrSchemaTooNew {
					other = ErrSchemaOutdated
				}
				if errors.Is(err, other) {
					t.Errorf("err %v matches %v too", err, other)
				}
				var sv *SchemaVersionError
				if !errors.As(err, &sv) || !slices.Equal(sv.Missing, tc.missing) || !slices.Equal(sv.Incompatible, tc.incompatible) {
					t.Errorf("err = %#v, want missing %v incompatible %v", err, tc.missing, tc.incompatible)
				}
				if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), tc.message) {
					t.Errorf("err = %q, want one line containing %q", err, tc.message)
				}
			}
			if (tc.warning == "") != (warning == "") || !strings.Contains(warning, tc.warning) {
				t.Errorf("warning = %q, want %q", warning, tc.warning)
			}
		})
	}
}

package leasehold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/driver"
)

// Schema version errors. Match them with errors.Is; the error itself is a
// *SchemaVersionError with the versions.
var (
	// ErrSchemaOutdated is wrapped when the database lacks migrations this
	// binary needs: run `leasehold migrate up` (or migrate.Migrator.Up).
	ErrSchemaOutdated = errors.New("leasehold: schema older than this binary needs")
	// ErrSchemaTooNew is wrapped when the database has migrations this
	// binary does not know and that are not declared compatible with it.
	ErrSchemaTooNew = errors.New("leasehold: schema newer than this binary supports")
)

// SchemaVersionError says how the database's schema and this binary's
// migrations disagree. Start returns it, as does CheckSchema; it matches
// ErrSchemaOutdated or ErrSchemaTooNew.
type SchemaVersionError struct {
	// Applied is the highest migration version the database records (0
	// when none).
	Applied int
	// Needed is the highest version this binary's driver knows.
	Needed int
	// Missing are the versions this binary knows that are not applied.
	Missing []int
	// Incompatible are the applied versions this binary does not know and
	// that are not declared compatible with Needed.
	Incompatible []int
}

// Error is one line that says what to run.
func (e *SchemaVersionError) Error() string {
	if len(e.Missing) > 0 {
		if e.Applied < e.Needed {
			return fmt.Sprintf("leasehold: schema at version %d, this binary needs %d: run `leasehold migrate up`", e.Applied, e.Needed)
		}
		return fmt.Sprintf("leasehold: schema lacks migration %s, which this binary needs: run `leasehold migrate up`", joinInts(e.Missing))
	}
	return fmt.Sprintf("leasehold: schema at version %d, this binary knows up to %d and migration %s is not declared compatible with it: deploy a binary that knows version %d (or revert with `leasehold migrate down --to %d` from one)",
		e.Applied, e.Needed, joinInts(e.Incompatible), e.Applied, e.Needed)
}

// Is matches ErrSchemaOutdated when migrations are missing, ErrSchemaTooNew
// otherwise.
func (e *SchemaVersionError) Is(target error) bool {
	if len(e.Missing) > 0 {
		return target == ErrSchemaOutdated
	}
	return target == ErrSchemaTooNew
}

func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

// CheckSchema compares the database's applied migrations with the ones this
// binary's driver knows, as Start does before it claims anything. It returns
// a *SchemaVersionError when the schema is older than the binary needs, or
// newer with migrations not declared compatible with it (see "Upgrading" in
// the package documentation). A newer schema whose extra migrations are
// declared compatible is logged as a warning and accepted. An insert-only
// client never calls Start; call CheckSchema at boot to check it too.
//
// Drivers that do not implement driver.MigrationStateReader (a wrapper that
// hides it) are not checked. A database whose leasehold tables were created
// by another migration tool, without the leasehold_migration bookkeeping, is
// not checked either: a warning says so.
func (c *Client[TTx]) CheckSchema(ctx context.Context) error { return c.core.checkSchema(ctx) }

// schemaSource is what the client core needs of the generic client to check
// the schema: implemented by *Client[TTx].
type schemaSource interface {
	schemaSpec() ([]driver.Migration, driver.MigrationStateReader)
}

func (c *Client[TTx]) schemaSpec() ([]driver.Migration, driver.MigrationStateReader) {
	r, _ := any(c.driver).(driver.MigrationStateReader)
	return c.driver.Migrations(), r
}

// checkSchema is CheckSchema; clientCore.start calls it.
func (c *clientCore) checkSchema(ctx context.Context) error {
	src, ok := c.client.(schemaSource)
	if !ok {
		return nil
	}
	known, reader := src.schemaSpec()
	if reader == nil {
		c.logger.Debug("leasehold: driver does not report its migration state; schema version not checked")
		return nil
	}
	st, err := reader.MigrationState(ctx)
	if err != nil {
		return fmt.Errorf("leasehold: check schema version: %w", err)
	}
	warning, err := schemaVerdict(known, st)
	if warning != "" {
		c.logger.Warn(warning)
	}
	return err
}

// schemaVerdict judges st against the known migrations: an error when the
// client must not run, else a warning to log (possibly empty).
func schemaVerdict(known []driver.Migration, st *driver.MigrationState) (string, error) {
	needed := 0
	for _, m := range known {
		needed = max(needed, m.Version)
	}
	if !st.Recorded && st.JobTable {
		return fmt.Sprintf("leasehold: the database has leasehold tables but no leasehold_migration bookkeeping, so the schema version is not checked: "+
			"make sure every migration up to version %d is applied (`leasehold migrate up` records them)", needed), nil
	}
	applied := 0
	appliedSet := map[int]driver.AppliedMigration{}
	for _, a := range st.Applied {
		applied = max(applied, a.Version)
		appliedSet[a.Version] = a
	}
	e := &SchemaVersionError{Applied: applied, Needed: needed}
	for _, m := range known {
		if _, ok := appliedSet[m.Version]; !ok {
			e.Missing = append(e.Missing, m.Version)
		}
	}
	if len(e.Missing) > 0 {
		return "", e
	}
	var newer []int
	for _, a := range st.Applied {
		if slices.ContainsFunc(known, func(m driver.Migration) bool { return m.Version == a.Version }) {
			continue
		}
		newer = append(newer, a.Version)
		if a.CompatibleWith == 0 || a.CompatibleWith > needed {
			e.Incompatible = append(e.Incompatible, a.Version)
		}
	}
	if len(e.Incompatible) > 0 {
		return "", e
	}
	if len(newer) > 0 {
		return fmt.Sprintf("leasehold: schema at version %d is newer than this binary (%d); migration %s declared compatible with it, so it runs: deploy the newer binary soon",
			applied, needed, joinInts(newer)), nil
	}
	return "", nil
}

package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	sqlitedrv "modernc.org/sqlite"

	"github.com/leasehold/leasehold/driver"
)

// sqliteConstraintUnique is SQLite's extended result code
// SQLITE_CONSTRAINT_UNIQUE: a unique index was violated.
const sqliteConstraintUnique = 2067

// translateError turns database/sql and SQLite errors into the driver's
// errors at the backend boundary: no rows is driver.ErrNotFound, a finished
// transaction driver.ErrClosed, and a unique violation wraps
// driver.ErrUniqueConflict along with SQLite's error. Other errors pass
// through unchanged.
func translateError(err error) error {
	switch {
	case isNoRows(err):
		return driver.ErrNotFound
	case errors.Is(err, sql.ErrTxDone):
		return driver.ErrClosed
	case isUniqueViolation(err):
		return fmt.Errorf("%w: %w", driver.ErrUniqueConflict, err)
	}
	return err
}

// isNoRows reports whether err is database/sql's no-rows error, which some
// statements expect (a skipped insert, a claim that found nothing).
func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// isUniqueViolation reports whether err is a unique index violation.
func isUniqueViolation(err error) bool {
	var se *sqlitedrv.Error
	return errors.As(err, &se) && se.Code() == sqliteConstraintUnique
}

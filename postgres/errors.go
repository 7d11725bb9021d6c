package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/driver"
)

// isUniqueViolation reports whether err is a unique index violation
// (SQLSTATE 23505).
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// translateError turns pgx and Postgres errors into the driver's errors at
// the backend boundary: no rows is driver.ErrNotFound, a closed transaction
// driver.ErrClosed, and a unique violation wraps driver.ErrUniqueConflict
// along with the database's error. Other errors pass through unchanged.
func translateError(err error) error {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return driver.ErrNotFound
	case errors.Is(err, pgx.ErrTxClosed):
		return driver.ErrClosed
	case isUniqueViolation(err):
		return fmt.Errorf("%w: %w", driver.ErrUniqueConflict, err)
	}
	return err
}

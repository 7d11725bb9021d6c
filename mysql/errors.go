package mysql

import (
	"database/sql"
	"errors"
	"fmt"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
)

// MySQL error numbers the driver acts on.
const (
	errDupEntry     = 1062
	errLockDeadlock = 1213
)

// errStatementTimeout is MariaDB's error number for a statement stopped
// by max_statement_time.
const errStatementTimeout = 1969

// isErrNumber reports whether err is a server error of number n.
func isErrNumber(err error, n uint16) bool {
	var me *mysqldriver.MySQLError
	return errors.As(err, &me) && me.Number == n
}

// isDeadlock reports whether err is InnoDB choosing this transaction as a
// deadlock victim (it has rolled the whole transaction back).
func isDeadlock(err error) bool { return isErrNumber(err, errLockDeadlock) }

// isDuplicate reports whether err is a unique index violation.
func isDuplicate(err error) bool { return isErrNumber(err, errDupEntry) }

// isStatementTimeout tells whether err is the server stopping a statement
// at its max_statement_time.
func isStatementTimeout(err error) bool { return isErrNumber(err, errStatementTimeout) }

// isSyntaxError tells whether err is the server's refusal to parse a
// statement.
func isSyntaxError(err error) bool { return isErrNumber(err, errSyntax) }

// translateError turns database/sql and MySQL errors into the driver's
// errors at the backend boundary: no rows is driver.ErrNotFound, a finished
// transaction driver.ErrClosed, and a duplicate key wraps
// driver.ErrUniqueConflict along with the server's error. Other errors pass
// through unchanged.
func translateError(err error) error {
	switch {
	case isNoRows(err):
		return driver.ErrNotFound
	case errors.Is(err, sql.ErrTxDone):
		return driver.ErrClosed
	case isDuplicate(err):
		return fmt.Errorf("%w: %w", driver.ErrUniqueConflict, err)
	}
	return err
}

// isNoRows reports whether err is database/sql's no-rows error.
func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

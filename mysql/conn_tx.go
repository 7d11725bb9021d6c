package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strings"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// beginSQL begins one of the driver's own transactions in front of its first
// statement, in the same round trip. SET TRANSACTION without SESSION sets the
// level of the next transaction only: the session keeps its own level, for
// the user of the pooled connection after the driver. READ COMMITTED keeps
// locking reads from taking gap locks (executor.beginPool says why).
const beginSQL = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION; "

// commitSQL ends a connTx, after its last statements in the same round trip.
const commitSQL = "COMMIT"

// rollbackSQL undoes a connTx. Outside a transaction it does nothing.
const rollbackSQL = "ROLLBACK"

// multiStatementsProbeSQL tells whether the connections of a *sql.DB send
// several statements, with arguments, in one round trip: that needs both
// multiStatements=true and interpolateParams=true in the DSN (without
// interpolation go-sql-driver prepares the text, and a prepared statement
// holds one statement). Without them the server answers a syntax error.
const multiStatementsProbeSQL = "DO ?; DO ?"

// errSyntax is the server's error number for SQL it cannot parse.
const errSyntax = 1064

// Probe states of Driver.multi.
const (
	multiUnknown int32 = iota
	multiYes
	multiNo
)

// multiStatements reports whether the driver's *sql.DB sends several
// statements with arguments in one round trip, probing it on q the first
// time. DSN and Open set what it needs; a *sql.DB given to New without it
// still works, with database/sql transactions (three round trips more per
// write) instead of connTx.
func (d *Driver) multiStatements(ctx context.Context, q querier) (bool, error) {
	switch d.multi.Load() {
	case multiYes:
		return true, nil
	case multiNo:
		return false, nil
	}
	_, err := q.ExecContext(ctx, multiStatementsProbeSQL, 1, 1)
	var me *mysqldriver.MySQLError
	switch {
	case err == nil:
		d.multi.Store(multiYes)
		return true, nil
	case errors.As(err, &me) && me.Number == errSyntax:
		d.multi.Store(multiNo)
		return false, nil
	}
	return false, fmt.Errorf("probe multi-statement support: %w", translateError(err))
}

// stmt is one statement and its arguments.
type stmt struct {
	query string
	args  []any
}

// connTx is one of the driver's own transactions, run with plain
// statements on a connection the driver holds for it instead of a *sql.Tx,
// so that beginning and committing it cost no round trips of their own:
// beginSQL goes in front of its first statement, and commit sends the
// transaction's last statements and COMMIT as one. A write of a locking
// read and an UPDATE is then two round trips, not five. It needs
// multi-statement support (Driver.multiStatements). Were a transaction ever
// left open on the connection, the next connTx would fail on its SET
// TRANSACTION (error 1568) rather than commit it with START TRANSACTION.
type connTx struct {
	conn *sql.Conn
	// begun is set once the first statement, with beginSQL in front of it,
	// was sent: from then on the transaction may be open.
	begun bool
}

var _ querier = (*connTx)(nil)

// text returns query as the transaction sends it: after beginSQL for its
// first statement.
func (t *connTx) text(query string) string {
	if t.begun {
		return query
	}
	t.begun = true
	return beginSQL + query
}

// ExecContext runs a statement in the transaction.
func (t *connTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.conn.ExecContext(ctx, t.text(query), args...)
}

// QueryContext runs a query in the transaction.
func (t *connTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.conn.QueryContext(ctx, t.text(query), args...)
}

// QueryRowContext runs a query of one row in the transaction.
func (t *connTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.conn.QueryRowContext(ctx, t.text(query), args...)
}

// commit sends last, then COMMIT, in one round trip; with nothing sent and
// nothing last there is no transaction to commit. A failed statement stops
// the server before the ones after it, COMMIT included: the caller then
// rolls back.
func (t *connTx) commit(ctx context.Context, last []stmt) error {
	if !t.begun && len(last) == 0 {
		return nil
	}
	query, args := joinStmts(append(last, stmt{query: commitSQL}))
	if _, err := t.ExecContext(ctx, query, args...); err != nil {
		return err
	}
	return nil
}

// restart undoes what the transaction wrote so far and begins it again
// with its next statement (beginSQL in front of it). When the ROLLBACK
// fails the transaction is left begun, for rollback to end it.
func (t *connTx) restart(ctx context.Context) error {
	if !t.begun {
		return nil
	}
	if _, err := t.conn.ExecContext(ctx, rollbackSQL); err != nil {
		return err
	}
	t.begun = false
	return nil
}

// rollback undoes the transaction, even when ctx is done. When the
// ROLLBACK fails the transaction may still be open on the connection, which
// is then closed instead of going back to the pool (or to its lane): the
// server rolls back a transaction whose connection closes, and no later
// statement can run in it.
func (t *connTx) rollback(ctx context.Context) {
	if !t.begun {
		return
	}
	if _, err := t.conn.ExecContext(context.WithoutCancel(ctx), rollbackSQL); err != nil {
		t.conn.Raw(func(any) error { return sqldriver.ErrBadConn }) //nolint:errcheck // it reports the ErrBadConn it was given
	}
}

// joinStmts joins statements into one text of several, with their
// arguments in order.
func joinStmts(stmts []stmt) (string, []any) {
	if len(stmts) == 1 {
		return stmts[0].query, stmts[0].args
	}
	var (
		b    strings.Builder
		args []any
	)
	for i, s := range stmts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s.query)
		args = append(args, s.args...)
	}
	return b.String(), args
}

// execEach runs statements one after the other on q.
func execEach(ctx context.Context, q querier, stmts []stmt) error {
	for _, s := range stmts {
		if _, err := q.ExecContext(ctx, s.query, s.args...); err != nil {
			return err
		}
	}
	return nil
}

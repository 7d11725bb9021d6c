package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// maxIdleConns is the idle connections Open keeps in the pool.
const maxIdleConns = 16

// DSN returns dsn, a go-sql-driver/mysql data source name
// ("user:pass@tcp(host:3306)/db"), with the settings the queue needs:
//
//   - multiStatements=true: Exec and the migrations send several statements,
//     and the driver's own transactions begin and commit in the round trips
//     of their first and last statements.
//   - interpolateParams=true: statements go in one round trip, not a prepare,
//     an execute and a close. (Not with the BIG5, CP932, GB2312, GBK or SJIS
//     connection character sets, which go-sql-driver refuses to interpolate.)
//   - parseTime=true and loc=UTC, time_zone='+00:00': not needed by the
//     driver, which reads times itself, but they make the application's own
//     reads of the leasehold tables agree with it.
//
// Users who open their own *sql.DB for New should use this DSN, or set at
// least multiStatements=true in theirs.
func DSN(dsn string) (string, error) {
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("parse mysql DSN: %w", err)
	}
	configure(cfg)
	return cfg.FormatDSN(), nil
}

// configure applies DSN's settings to cfg.
func configure(cfg *mysqldriver.Config) {
	cfg.MultiStatements = true
	cfg.InterpolateParams = true
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
}

// Open opens the database at dsn with DSN's settings, checks that it answers,
// and returns a driver on it and the database, which the caller closes. It
// does not apply migrations.
func Open(dsn string) (*Driver, *sql.DB, error) {
	full, err := DSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("mysql", full)
	if err != nil {
		return nil, nil, fmt.Errorf("open mysql database: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("open mysql database: %w", err)
	}
	db.SetMaxIdleConns(maxIdleConns)
	// Servers close idle connections after wait_timeout (8 h by default);
	// recycling them sooner avoids a failed first statement after a quiet night.
	db.SetConnMaxIdleTime(5 * time.Minute)
	return New(db), db, nil
}

package mysql

import (
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
)

func TestDSN(t *testing.T) {
	t.Parallel()
	got, err := DSN("u:p@tcp(db:3306)/app?charset=utf8mb4")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysqldriver.ParseDSN(got)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.MultiStatements || !cfg.InterpolateParams || !cfg.ParseTime || cfg.Loc != time.UTC ||
		cfg.Params["time_zone"] != "'+00:00'" || cfg.DBName != "app" || cfg.Addr != "db:3306" {
		t.Errorf("DSN = %s: %+v", got, cfg)
	}
	if _, err := DSN("not a dsn"); err == nil {
		t.Error("DSN of garbage: got no error")
	}
}

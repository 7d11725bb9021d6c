package main

import "testing"

// TestMySQLConfig: LEASEHOLD_TEST_MYSQL_URL takes a go-sql-driver DSN, as the
// mysql package's tests read it, or a mysql:// URL.
func TestMySQLConfig(t *testing.T) {
	for _, c := range []struct {
		env, user, pass, addr, db, param string
	}{
		{"", "root", "", "127.0.0.1:3306", "test", ""},
		{"root@tcp(127.0.0.1:3306)/test", "root", "", "127.0.0.1:3306", "test", ""},
		{"bench:s3cret@tcp(db.internal:3307)/q?innodb_lock_wait_timeout=5", "bench", "s3cret", "db.internal:3307", "q", "5"},
		{"mysql://root@127.0.0.1:3306/test", "root", "", "127.0.0.1:3306", "test", ""},
		{"mysql://bench:s3cret@db.internal/q?innodb_lock_wait_timeout=5", "bench", "s3cret", "db.internal:3306", "q", "5"},
	} {
		t.Setenv("LEASEHOLD_TEST_MYSQL_URL", c.env)
		cfg, err := mysqlConfig()
		if err != nil {
			t.Fatalf("%q: %v", c.env, err)
		}
		if cfg.User != c.user || cfg.Passwd != c.pass || cfg.Net != "tcp" || cfg.Addr != c.addr || cfg.DBName != c.db || cfg.Params["innodb_lock_wait_timeout"] != c.param {
			t.Errorf("%q: got user %q pass %q net %q addr %q db %q innodb_lock_wait_timeout %q", c.env, cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName, cfg.Params["innodb_lock_wait_timeout"])
		}
	}
	t.Setenv("LEASEHOLD_TEST_MYSQL_URL", "mysql://[bad")
	if _, err := mysqlConfig(); err == nil {
		t.Error("a malformed URL parsed")
	}
}

package mysql

import (
	"errors"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"
)

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	_, _, err := Open("root@tcp(127.0.0.1:1)/test?timeout=2s")
	if err == nil {
		t.Fatal("Open of a closed port: got no error")
	}
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		t.Fatalf("Open of a closed port: got a server error %v", err)
	}
}

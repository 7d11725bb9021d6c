package mysql

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/migrate"
)

// TestMigration3RevertsExactly: version 3's down migration leaves the schema
// of version 2, byte for byte as the server shows it, with rows in it.
func TestMigration3RevertsExactly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, db := newTestDB(t)
	m := migrate.New(d)
	if _, err := m.UpTo(ctx, 2); err != nil {
		t.Fatal(err)
	}
	// A row of version 2 (the driver writes version 3's columns).
	if _, err := db.ExecContext(ctx, `INSERT INTO leasehold_job
		(kind, queue, args, metadata, unique_key, max_attempts, scheduled_at, created_at)
		VALUES ('k', 'q', '{}', '{}', 'key', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	before := showCreate(t, db)
	if _, err := m.UpTo(ctx, 3); err != nil {
		t.Fatalf("up to 3: %v", err)
	}
	if _, err := m.DownTo(ctx, 2); err != nil {
		t.Fatalf("down to 2: %v", err)
	}
	if after := showCreate(t, db); after != before {
		t.Fatalf("schema after 3 up and down differs from version 2:\n--- before\n%s\n--- after\n%s", before, after)
	}
}

// showCreate returns the definitions of the leasehold tables, in name order.
func showCreate(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT table_name FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name LIKE 'leasehold\_%' AND table_name <> 'leasehold_migration'
		ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		var name, def string
		if err := db.QueryRowContext(t.Context(), "SHOW CREATE TABLE "+n).Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		// AUTO_INCREMENT=n depends on the rows, not the schema.
		if i := strings.Index(def, " AUTO_INCREMENT="); i >= 0 {
			j := strings.IndexByte(def[i+1:], ' ')
			if j < 0 {
				j = len(def) - i - 1
			}
			def = def[:i] + def[i+1+j:]
		}
		b.WriteString(def + "\n")
	}
	return b.String()
}

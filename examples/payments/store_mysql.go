package payments

import (
	"context"
	"database/sql"
	"strings"
)

// mysqlSchema is the payments tables in MySQL's dialect, replacing the
// statements of schema and ledgerSchema: MySQL indexes no unbounded TEXT, has no partial
// index, and MySQL 8 no CREATE INDEX IF NOT EXISTS, so the pending index
// goes into the table and the second statement becomes a no-op.
var mysqlSchema = map[string]string{
	"CREATE TABLE IF NOT EXISTS payments": `CREATE TABLE IF NOT EXISTS payments (
    id              VARCHAR(191) NOT NULL PRIMARY KEY,
    amount_cents    BIGINT       NOT NULL CHECK (amount_cents > 0),
    currency        VARCHAR(3)   NOT NULL,
    status          VARCHAR(16)  NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    idempotency_key VARCHAR(255) NOT NULL UNIQUE,
    charge_job_id   BIGINT       NOT NULL DEFAULT 0,
    psp_charge_id   TEXT,
    failure_reason  TEXT,
    settled_by      TEXT,
    settled_token   BIGINT       NOT NULL DEFAULT 0,
    merchant_id     VARCHAR(191) NOT NULL DEFAULT '',
    customer_id     VARCHAR(191) NOT NULL DEFAULT '',
    psp_refund_id   TEXT,
    refund_token    BIGINT       NOT NULL DEFAULT 0,
    created_at_ms   BIGINT       NOT NULL,
    updated_at_ms   BIGINT       NOT NULL,
    KEY payments_pending_idx (status, created_at_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
	"CREATE INDEX IF NOT EXISTS payments_pending_idx": `DO 0`,
	"CREATE TABLE IF NOT EXISTS ledger": `CREATE TABLE IF NOT EXISTS ledger (
    payment_id    VARCHAR(191) NOT NULL,
    entry         VARCHAR(16)  NOT NULL DEFAULT 'charge',
    merchant_id   VARCHAR(191) NOT NULL,
    amount_cents  BIGINT       NOT NULL,
    currency      VARCHAR(3)   NOT NULL,
    psp_charge_id VARCHAR(191) NOT NULL,
    payout_id     VARCHAR(191),
    created_at_ms BIGINT       NOT NULL,
    PRIMARY KEY (payment_id, entry),
    KEY ledger_unpaid_idx (merchant_id, payout_id),
    KEY ledger_payout_idx (payout_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
	"CREATE INDEX IF NOT EXISTS ledger_unpaid_idx": `DO 0`,
	"CREATE INDEX IF NOT EXISTS ledger_payout_idx": `DO 0`,
	"CREATE INDEX IF NOT EXISTS payouts_batch_idx": `DO 0`,
	"CREATE TABLE IF NOT EXISTS payouts": `CREATE TABLE IF NOT EXISTS payouts (
    id            VARCHAR(191) NOT NULL PRIMARY KEY,
    batch_id      VARCHAR(191) NOT NULL,
    merchant_id   VARCHAR(191) NOT NULL,
    amount_cents  BIGINT       NOT NULL,
    entries       BIGINT       NOT NULL,
    job_token     BIGINT       NOT NULL,
    created_at_ms BIGINT       NOT NULL,
    KEY payouts_batch_idx (batch_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
	"CREATE TABLE IF NOT EXISTS settlement_reports": `CREATE TABLE IF NOT EXISTS settlement_reports (
    batch_id       VARCHAR(191) NOT NULL PRIMARY KEY,
    payouts        BIGINT       NOT NULL,
    payout_cents   BIGINT       NOT NULL,
    ledger_entries BIGINT       NOT NULL,
    ledger_cents   BIGINT       NOT NULL,
    unpaid_entries BIGINT       NOT NULL,
    created_at_ms  BIGINT       NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
}

// NewMySQLStore returns a store on a MySQL or MariaDB database, the database
// of the leasehold mysql backend (mysql.Open).
func NewMySQLStore(db *sql.DB) *Store[*sql.Tx] {
	return &Store[*sql.Tx]{b: mysqlBackend{sqliteBackend{db: db}}}
}

// mysqlBackend is the database/sql backend of SQLite with the schema in
// MySQL's dialect; the other statements are the same.
type mysqlBackend struct{ sqliteBackend }

func (b mysqlBackend) pool() querier { return mysqlQuerier{sqlQuerier{q: b.db}} }

type mysqlQuerier struct{ sqlQuerier }

func (m mysqlQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	trimmed := strings.TrimSpace(query)
	for prefix, stmt := range mysqlSchema {
		if strings.HasPrefix(trimmed, prefix) {
			query = stmt
			break
		}
	}
	return m.sqlQuerier.exec(ctx, query, args...)
}

// begin starts a READ COMMITTED transaction, as the mysql backend advises
// for transactions passed to InsertTx and CompleteTx: InnoDB's gap locks
// under REPEATABLE READ would make concurrent completions deadlock.
func (b mysqlBackend) begin(ctx context.Context) (*sql.Tx, error) {
	return b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
}

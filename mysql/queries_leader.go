package mysql

// SQL for leader leases. As for job leases, the conditional write is a
// locking read that decides, then the UPDATE of the locked row: no other
// client can take or renew the lease in between.

// queryLeaderLock locks leader row ?1 and reads its holder and whether its
// lease has expired on the database clock.
const queryLeaderLock = `SELECT owner, token, lease_until <= ` + sqlNow + `
FROM leasehold_leader WHERE name = ? FOR UPDATE`

// queryLeaderInsert grants a lease that no row records yet: name, owner,
// TTL in microseconds. The first holder's token is 1.
const queryLeaderInsert = `INSERT INTO leasehold_leader (name, owner, token, lease_until, acquired_at, updated_at)
VALUES (?, ?, 1, ` + sqlNow + ` + INTERVAL ? MICROSECOND, ` + sqlNow + `, ` + sqlNow + `)`

// queryLeaderTakeOver grants an expired lease to a new holder: owner, TTL
// in microseconds, name. Its token grows by one.
const queryLeaderTakeOver = `UPDATE leasehold_leader
SET owner = ?, token = token + 1,
	lease_until = ` + sqlNow + ` + INTERVAL ? MICROSECOND,
	acquired_at = ` + sqlNow + `, updated_at = ` + sqlNow + `
WHERE name = ?`

// queryLeaderRenew extends the holder's lease: TTL in microseconds, name.
const queryLeaderRenew = `UPDATE leasehold_leader
SET lease_until = ` + sqlNow + ` + INTERVAL ? MICROSECOND, updated_at = ` + sqlNow + `
WHERE name = ?`

// queryLeaderGet reads a leader row.
const queryLeaderGet = `SELECT name, owner, token, lease_until, acquired_at
FROM leasehold_leader WHERE name = ?`

// queryLeaderResign ends the lease of name ?1 when owner ?2 holds it with
// token ?3. LEAST never moves an already expired lease later. The owner is
// compared as bytes (utf8mb4_bin ignores trailing spaces).
const queryLeaderResign = `UPDATE leasehold_leader
SET lease_until = LEAST(lease_until, ` + sqlNow + `), updated_at = ` + sqlNow + `
WHERE name = ? AND CAST(owner AS BINARY) = CAST(? AS BINARY) AND token = ?`

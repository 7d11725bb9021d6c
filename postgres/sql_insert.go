package postgres

// uniqueKeyHeld is the predicate of the unique-key index (migration 3): a key
// is held by every unfinished job, and by a finished one whose
// unique_finished bitmask names its state (1 completed, 2 discarded, 4
// cancelled). The insert's ON CONFLICT target repeats it word for word, so
// that the planner infers the index, and the lookup of the existing holder
// uses it too, so that a skipped row always finds the job that skipped it.
const uniqueKeyHeld = `unique_key IS NOT NULL
      AND (state IN ('available', 'scheduled', 'running', 'retryable', 'stuck')
           OR (state = 'completed' AND unique_finished & 1 <> 0)
           OR (state = 'discarded' AND unique_finished & 2 <> 0)
           OR (state = 'cancelled' AND unique_finished & 4 <> 0))`

// sqlJobInsertMany inserts a batch from parallel arrays in one statement.
// IDs are drawn from the sequence up front, in input order, so that the rows
// returned can be matched to their input position (ord). Rows whose key is
// taken are skipped by the unique index, which makes concurrent inserts safe.
//
// Rows go in in unique-key order: an insert waits for a concurrent
// uncommitted holder of its key, and two batches that take the same keys in
// opposite orders would otherwise deadlock. Within a key, input order holds,
// so the first of two rows with the same key is the one inserted.
const sqlJobInsertMany = sqlJobInsertCTEs + `
SELECT input.ord, inserted.*
FROM inserted JOIN input ON input.new_id = inserted.id`

// sqlJobInsertNotify is sqlJobInsertMany that also wakes the listeners of
// the queues it inserted available jobs into, so that a single insert
// outside a transaction is one statement and one round trip. pg_notify is
// volatile, so the notified CTE is evaluated once, and only when rows were
// inserted; the notifications go out when the statement commits.
const sqlJobInsertNotify = sqlJobInsertCTEs + `,
notified AS (
	SELECT count(pg_notify('` + insertChannel + `', q.queue)) AS notifications
	FROM (SELECT DISTINCT queue FROM inserted WHERE state = 'available') AS q
)
SELECT input.ord, inserted.*
FROM inserted JOIN input ON input.new_id = inserted.id, notified`

const sqlJobInsertCTEs = `
WITH input AS MATERIALIZED (
	SELECT nextval('leasehold_job_id_seq') AS new_id, i.*
	FROM unnest($1::text[], $2::text[], $3::int[], $4::jsonb[], $5::jsonb[],
	            $6::text[], $7::int[], $8::bigint[], $9::timestamptz[], $10::smallint[])
		WITH ORDINALITY AS i(in_kind, in_queue, in_priority, in_args, in_metadata,
		                     in_unique_key, in_max_attempts, in_lease_ttl_ms, in_scheduled_at,
		                     in_unique_finished, ord)
	ORDER BY ord
),
inserted AS (
	INSERT INTO leasehold_job (id, kind, queue, state, priority, args, metadata,
	                           unique_key, max_attempts, lease_ttl_ms, scheduled_at, unique_finished)
	SELECT new_id, in_kind, in_queue,
		CASE WHEN in_scheduled_at > now() THEN 'scheduled' ELSE 'available' END,
		in_priority, in_args, in_metadata, in_unique_key, in_max_attempts,
		in_lease_ttl_ms, coalesce(in_scheduled_at, now()), in_unique_finished
	FROM input
	ORDER BY in_unique_key, ord
	ON CONFLICT (unique_key) WHERE ` + uniqueKeyHeld + `
	DO NOTHING
	RETURNING ` + jobColumns + `
)`

// sqlJobGetHoldersByKeys returns the jobs holding the given unique keys.
const sqlJobGetHoldersByKeys = `
SELECT ` + jobColumns + `
FROM leasehold_job
WHERE unique_key = ANY($1::text[]) AND ` + uniqueKeyHeld

// sqlNotifyInserts wakes the listeners of each queue in $1. Postgres delivers
// the notifications when the transaction commits.
const sqlNotifyInserts = `
SELECT pg_notify('leasehold_insert', q) FROM unnest($1::text[]) AS q`

// insertChannel is the LISTEN/NOTIFY channel; payloads are queue names.
const insertChannel = "leasehold_insert"

// sqlListen subscribes a connection to insertChannel.
const sqlListen = `LISTEN leasehold_insert`

// jobCopyColumns are the columns JobInsertFast copies; the rest take their
// defaults.
var jobCopyColumns = []string{
	"kind", "queue", "state", "priority", "args", "metadata",
	"max_attempts", "lease_ttl_ms", "scheduled_at", "unique_finished",
}

// sqlNow reads the database clock (the transaction's start inside one).
const sqlNow = `SELECT now()`

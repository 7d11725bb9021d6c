#!/usr/bin/env bash
# What one statement on the Postgres job table costs at two schema versions:
# a one-job insert and a one-job state update (pgbench, prepared, one
# client, each ROUNDS times alternating), and a 20,000-job INSERT ... SELECT.
# Each version gets a database of its own, migrated by this checkout's CLI
# and dropped at the end. BENCHMARKS.md quotes it for Postgres migration 13.
#
#	scripts/job-table-cost.sh [--url URL] [--from N] [--to N] [--rounds K] [--seconds S]
#
# URL is a server's maintenance database (default the test server's
# postgres database); --from defaults to 12 and --to to the latest version.
# The server must allow CREATE DATABASE. pgbench comes with the Postgres
# server packages (/usr/lib/postgresql/*/bin).
set -euo pipefail
cd "$(dirname "$0")/.."

url="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
from=12
to=""
rounds=3
seconds=6
while [ $# -gt 0 ]; do
	case "$1" in
	--url) url="$2"; shift 2 ;;
	--from) from="$2"; shift 2 ;;
	--to) to="$2"; shift 2 ;;
	--rounds) rounds="$2"; shift 2 ;;
	--seconds) seconds="$2"; shift 2 ;;
	*) echo "job-table-cost: unknown argument $1" >&2; exit 2 ;;
	esac
done
pgbench=$(command -v pgbench || ls -d /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$pgbench" ]; then
	echo "job-table-cost: pgbench not found: install the Postgres server package (Debian: apt-get install postgresql)" >&2
	exit 1
fi

export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
work=$(mktemp -d)
dbs=()
cleanup() {
	for db in "${dbs[@]}"; do
		psql -X -q "$url" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/leasehold" ./cmd/leasehold

# dbURL returns url with its database replaced by $1.
dbURL() {
	local base="${url%%\?*}" query=""
	[ "$url" != "$base" ] && query="?${url#*\?}"
	echo "${base%/*}/$1$query"
}

# label names a version as the output does.
label() {
	if [ "$1" = latest ]; then echo "latest"; else echo "v$1"; fi
}

versions=("$from" "${to:-latest}")
for v in "${versions[@]}"; do
	db="leasehold_cost_$v"
	dbs+=("$db")
	psql -X -q "$url" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\""
	args=()
	[ "$v" != latest ] && args=(--to "$v")
	"$work/leasehold" migrate up "${args[@]}" --database-url "$(dbURL "$db")" >/dev/null
	echo -n "$(label "$v") bulk insert of 20,000 jobs: "
	psql -X -q "$(dbURL "$db")" -c '\timing on' -c "INSERT INTO leasehold_job (kind, queue, args, max_attempts)
		SELECT 'payment.charge', 'default', jsonb_build_object('n', g), 25 FROM generate_series(1, 20000) g" | grep Time
	psql -X -q "$(dbURL "$db")" -c "VACUUM ANALYZE leasehold_job"
done

cat >"$work/insert.sql" <<'EOF'
INSERT INTO leasehold_job (kind, queue, args, max_attempts) VALUES ('payment.charge', 'default', '{"n": 1}', 25);
EOF
cat >"$work/update.sql" <<'EOF'
\set id random(1, 20000)
UPDATE leasehold_job SET state = CASE WHEN state = 'running' THEN 'completed' ELSE 'running' END, finalized_at = now() WHERE id = :id;
EOF
for r in $(seq "$rounds"); do
	for what in update insert; do
		for v in "${versions[@]}"; do
			echo -n "round $r $(label "$v") one-job $what: "
			"$pgbench" -n -M prepared -c 1 -T "$seconds" -f "$work/$what.sql" "$(dbURL "leasehold_cost_$v")" 2>&1 | grep "latency average"
		done
	done
done

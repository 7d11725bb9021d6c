#!/usr/bin/env bash
# The floor under an enqueue-to-start latency on this machine: how long a
# bare one-row INSERT into a two-column table, committed on its own, takes
# at a fixed rate (pgbench --rate, 4 clients as the bench's pool), with no
# queue, trigger, index but the primary key, or notification. bench latency's "[insert call ...]"
# is the same commit with the job row; no engine starts a job before its
# insert has committed. Prints p50 / p90 / p99 / max over the run of the
# statement's own time and of the time from its scheduled start.
#
#	scripts/commit-floor.sh [--url URL] [--rate N] [--seconds S]
#
# URL defaults to the test server's test database; a scratch table
# leasehold_commit_floor is created there and dropped at the end. pgbench
# comes with the Postgres server packages (/usr/lib/postgresql/*/bin).
set -euo pipefail

url="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
rate=1000
seconds=10
while [ $# -gt 0 ]; do
	case "$1" in
	--url) url="$2"; shift 2 ;;
	--rate) rate="$2"; shift 2 ;;
	--seconds) seconds="$2"; shift 2 ;;
	*) echo "commit-floor: unknown argument $1" >&2; exit 2 ;;
	esac
done
pgbench=$(command -v pgbench || ls -d /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$pgbench" ]; then
	echo "commit-floor: pgbench not found: install the Postgres server package (Debian: apt-get install postgresql)" >&2
	exit 1
fi

export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
work=$(mktemp -d)
cleanup() {
	psql -X -q "$url" -c "DROP TABLE IF EXISTS leasehold_commit_floor" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
psql -X -q -v ON_ERROR_STOP=1 "$url" -c "DROP TABLE IF EXISTS leasehold_commit_floor" \
	-c "CREATE TABLE leasehold_commit_floor (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())"
echo "INSERT INTO leasehold_commit_floor DEFAULT VALUES;" >"$work/insert.sql"
(cd "$work" && "$pgbench" -n -M prepared -c 4 -j 1 -R "$rate" -T "$seconds" --log --log-prefix=floor \
	-f insert.sql "$url" >pgbench.out 2>&1) || { cat "$work/pgbench.out" >&2; exit 1; }
# Each log line: client, transaction, time (us, from the scheduled start),
# script, epoch, us, schedule lag (us). pgbench schedules at random
# (Poisson) times, so a transaction may wait for one of the 4 clients: the
# statement alone leaves that wait out, from its schedule counts it in.
pct() {
	sort -n | awk -v what="$1" -v rate="$rate" '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "commit-floor: pgbench logged no transactions" > "/dev/stderr"; exit 1 }
			printf "commit floor @%s/s  %-22s %d inserts  ms  p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", rate, what, NR,
				v[int(NR * 0.50) + 1], v[int(NR * 0.90) + 1], v[int(NR * 0.99) + 1], v[NR]
		}'
}
cat "$work"/floor.* | awk '{ print ($3 - $7) / 1000 }' | pct "the statement alone"
cat "$work"/floor.* | awk '{ print $3 / 1000 }' | pct "from its schedule"

#!/usr/bin/env bash
# A throwaway Postgres with pg_stat_statements (planning tracked too), for
# reading what the server spends per statement while a bench mode runs:
# calls, plans, planning and execution time, rows, buffers. The shared
# server on 5432 cannot load the module without a restart, so this starts
# a cluster of its own on 127.0.0.1, as the postgres OS user, and stops it
# by its PID.
#
#	scripts/pg-stats-cluster.sh up [--port N] [--dir DIR]     prints the URL to use
#	scripts/pg-stats-cluster.sh top [--port N] [--limit K]    the statements by total time
#	                                                            (exec_sd_us: the execution time's standard deviation)
#	scripts/pg-stats-cluster.sh reset [--port N]              empties the statistics
#	scripts/pg-stats-cluster.sh down [--port N] [--dir DIR]
#
# Typical use (cd bench):
#	url=$(../scripts/pg-stats-cluster.sh up)
#	../scripts/pg-stats-cluster.sh reset
#	LEASEHOLD_TEST_POSTGRES_URL=$url go run . payments -engines leasehold -rounds 1
#	../scripts/pg-stats-cluster.sh top
#
# The port defaults to 25999 (below Linux's ephemeral range); the data
# directory to /tmp/leasehold-pgstats-PORT. autovacuum is off, as on the
# shared test server. top covers every database of the cluster (the
# payments mode makes one of its own).
set -euo pipefail

cmd="${1:-}"
[ $# -gt 0 ] && shift
port=25999
dir=""
limit=15
while [ $# -gt 0 ]; do
	case "$1" in
	--port) port="$2"; shift 2 ;;
	--dir) dir="$2"; shift 2 ;;
	--limit) limit="$2"; shift 2 ;;
	*) echo "pg-stats-cluster: unknown argument $1" >&2; exit 2 ;;
	esac
done
dir="${dir:-/tmp/leasehold-pgstats-$port}"
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
	echo "pg-stats-cluster: no Postgres server binaries under /usr/lib/postgresql/*/bin; install them (Debian: apt-get install postgresql)" >&2
	exit 1
fi
url="postgres://postgres@127.0.0.1:$port/test?sslmode=disable"
as_postgres() {
	if [ "$(id -u)" = 0 ]; then
		su postgres -s /bin/bash -c "$*"
	else
		bash -c "$*"
	fi
}
sql() {
	psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d test "$@"
}

case "$cmd" in
up)
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		mkdir -p "$dir"
		[ "$(id -u)" = 0 ] && chown postgres "$dir"
		as_postgres "'$bin/initdb' -D '$dir/data' -A trust -U postgres >/dev/null"
		cat >>"$dir/data/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.track_planning = on
autovacuum = off
max_wal_size = 1GB
max_connections = 200
EOF
	fi
	if [ ! -f "$dir/data/postmaster.pid" ]; then
		as_postgres "'$bin/pg_ctl' -D '$dir/data' -l '$dir/log' -w start >/dev/null"
	fi
	psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 ||
		psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE test"
	sql -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
	echo "$url"
	;;
reset)
	sql -tAc "SELECT pg_stat_statements_reset()" >/dev/null
	;;
top)
	sql -c "SELECT calls, plans,
		round(total_plan_time::numeric, 1) AS plan_ms,
		round(total_exec_time::numeric, 1) AS exec_ms,
		round(((total_plan_time + total_exec_time) / nullif(calls, 0) * 1000)::numeric, 1) AS us_per_call,
		round((stddev_exec_time * 1000)::numeric, 1) AS exec_sd_us,
		rows, shared_blks_hit AS hits,
		left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS statement
	FROM pg_stat_statements
	WHERE query NOT LIKE '%pg_stat_statements%'
	ORDER BY total_plan_time + total_exec_time DESC
	LIMIT $limit"
	;;
down)
	if [ -f "$dir/data/postmaster.pid" ]; then
		pid=$(head -n 1 "$dir/data/postmaster.pid")
		kill -INT "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
	fi
	rm -rf "$dir"
	;;
*)
	echo "usage: pg-stats-cluster.sh up|top|reset|down [--port N] [--dir DIR] [--limit K]" >&2
	exit 2
	;;
esac

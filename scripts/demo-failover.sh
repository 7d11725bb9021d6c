#!/usr/bin/env bash
# The payments demo through a Postgres failover (RELIABILITY.md): `leasehold
# demo` creates and charges payments through HAProxy in front of a 3-node
# Patroni cluster (scripts/ha-cluster.sh, synchronous replication) while
# the primary's Patroni and postmaster are SIGKILLed mid-creation. The demo
# must settle every payment exactly once; its summary says how many
# creations it retried. About 40 s; everything it started is stopped on
# every exit path. DEMO_FAILOVER_PAYMENTS (default 4000), DEMO_FAILOVER_KILL_AFTER
# (seconds, default 2.5) and DEMO_FAILOVER_BASE_PORT (default 27432) change it.
set -euo pipefail
cd "$(dirname "$0")/.."

payments="${DEMO_FAILOVER_PAYMENTS:-4000}"
kill_after="${DEMO_FAILOVER_KILL_AFTER:-2.5}"
base="${DEMO_FAILOVER_BASE_PORT:-27432}"
work=$(mktemp -d)
dir=$(mktemp -d -u "${TMPDIR:-/tmp}/leasehold-ha-XXXXXX")
demo_pid=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$demo_pid" ] && kill -0 "$demo_pid" 2>/dev/null; then
		kill -TERM "$demo_pid" 2>/dev/null || true
		wait "$demo_pid" 2>/dev/null || true
	fi
	scripts/ha-cluster.sh down --dir "$dir" --base-port "$base" >/dev/null 2>&1 ||
		echo "error: demo-failover.sh: could not take down the cluster in $dir" >&2
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

scripts/ensure-ha.sh
go build -o "$work/leasehold" ./cmd/leasehold
scripts/ha-cluster.sh up --sync --dir "$dir" --base-port "$base" >"$work/up.log" 2>&1 || {
	cat "$work/up.log" >&2
	exit 1
}
# shellcheck disable=SC1091
. "$dir/ha.env"

"$work/leasehold" demo --database-url "$HA_HAPROXY_URL" --payments "$payments" --timeout 3m --json >"$work/summary.json" 2>"$work/demo.log" &
demo_pid=$!
sleep "$kill_after"
killed=""
for i in 1 2 3; do
	port_var="HA_NODE${i}_REST_PORT"
	if [ "$(curl -s -m 1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:${!port_var}/primary" || true)" = 200 ]; then
		patroni=$(cat "$dir/node$i/patroni.pid")
		postmaster=$(head -n 1 "$dir/node$i/data/postmaster.pid")
		kill -KILL "$patroni" 2>/dev/null || true
		pkill -KILL -P "$postmaster" 2>/dev/null || true
		kill -KILL "$postmaster" 2>/dev/null || true
		killed="node$i"
		break
	fi
done
if [ -z "$killed" ]; then
	echo "error: demo-failover.sh: found no primary to kill" >&2
	exit 1
fi
rc=0
wait "$demo_pid" || rc=$?
demo_pid=""
echo "--- demo through a failover (primary $killed SIGKILLed after ${kill_after}s)"
cat "$work/summary.json"
if [ "$rc" != 0 ]; then
	tail -n 20 "$work/demo.log" >&2
	echo "error: demo-failover.sh: the demo failed through the failover (exit $rc)" >&2
	exit 1
fi

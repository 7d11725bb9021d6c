#!/usr/bin/env bash
# Postgres failover under load (RELIABILITY.md): the chaos harness works
# payments with worker processes through a 3-node Patroni cluster
# (scripts/ha-cluster.sh) and fails its primary over, then checks that
# every acknowledged payment completed exactly once, that nothing was done
# twice past the fencing, and measures the write outage.
#
#	scripts/chaos-failover.sh          synchronous replication, SIGKILL of the
#	                                   primary, through HAProxy (CI, ~3 min)
#	scripts/chaos-failover.sh --all    sync/async x switchover/kill/freeze x
#	                                   HAProxy/multi-host, a fresh cluster per row
#
# One JSON report per run on stdout, then a table. Exits non-zero when a run
# failed (with async replication, lost acknowledged writes are reported,
# not failed). Everything it started is stopped on every exit path.
# CHAOS_SEED, CHAOS_HA_BASE_PORT (default 25432) and CHAOS_FAILOVER_PAYMENTS
# change the runs.
set -euo pipefail
cd "$(dirname "$0")/.."

all=0
case "${1:-}" in
--all) all=1 ;;
"") ;;
*) echo "usage: chaos-failover.sh [--all]" >&2; exit 2 ;;
esac
seed="${CHAOS_SEED:-1}"
base="${CHAOS_HA_BASE_PORT:-25432}"
payments="${CHAOS_FAILOVER_PAYMENTS:-400}"

work=$(mktemp -d)
# The cluster's directory is its own: ha-cluster.sh gives it to the
# postgres user, who cannot enter $work.
dir=$(mktemp -d -u "${TMPDIR:-/tmp}/leasehold-ha-XXXXXX")
chaos_pid=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$chaos_pid" ] && kill -0 "$chaos_pid" 2>/dev/null; then
		kill -TERM "$chaos_pid" 2>/dev/null || true
		wait "$chaos_pid" 2>/dev/null || true
	fi
	scripts/ha-cluster.sh down --dir "$dir" --base-port "$base" >/dev/null 2>&1 ||
		echo "error: chaos-failover.sh: could not take down the cluster in $dir" >&2
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

scripts/ensure-ha.sh
go build -o "$work/chaos" ./cmd/chaos

failed=0
results="$work/results.jsonl"
: >"$results"

# run MODE FAULT ROUTE: one run on a fresh cluster.
run() {
	local mode=$1 fault=$2 route=$3 rc=0 out="$work/run.json"
	echo "--- chaos failover: $mode replication, $fault, via $route (seed $seed)" >&2
	if ! timeout 120 scripts/ha-cluster.sh up "--$mode" --dir "$dir" --base-port "$base" >&2; then
		echo "error: chaos-failover.sh: the cluster did not come up" >&2
		failed=1
		return 0
	fi
	# Bounded: the fault phase, at most 45 s of drain, the checks.
	timeout -k 10 150 "$work/chaos" --backend postgres --ha-state "$dir/ha.env" --ha-route "$route" \
		--faults "$fault" --seed "$seed" --payments "$payments" --workers 3 \
		--duration 40s --drain 45s --json >"$out" &
	chaos_pid=$!
	wait "$chaos_pid" || rc=$?
	chaos_pid=""
	if [ -s "$out" ]; then
		cat "$out"
		cat "$out" >>"$results"
	fi
	if [ "$rc" != 0 ]; then
		echo "error: chaos-failover.sh: run $mode/$fault/$route failed (exit $rc)" >&2
		failed=1
	fi
	scripts/ha-cluster.sh down --dir "$dir" --base-port "$base" >&2
}

if [ "$all" = 1 ]; then
	for mode in sync async; do
		for fault in failover_switchover failover_kill failover_freeze; do
			for route in haproxy multihost; do
				run "$mode" "$fault" "$route"
			done
		done
	done
else
	run sync failover_kill haproxy
fi

if command -v jq >/dev/null 2>&1 && [ -s "$results" ]; then
	echo "--- results" >&2
	{
		echo "ok mode fault route outage_ms first_insert_ms claim_outage_ms leader_ms acked lost orphan_charges completions_lost token_reuses job_ids_reused foreign_outcomes doubled fenced"
		jq -r '[.ok, .ha.mode, .ha.fault, .ha.route, .ha.write_outage_ms, .ha.first_insert_ms, .ha.claim_outage_ms,
			(.ha.failovers[0].leader_ms // -1), .acknowledged, (.ha.lost_acked | length), (.ha.orphan_charges | length),
			(.ha.completions_lost | length), (.ha.token_reuses | length), (.ha.job_ids_reused | length),
			(.ha.foreign_outcomes | length), .ha.doubled, .ha.fenced] | @tsv' "$results"
	} | column -t >&2
fi
exit "$failed"

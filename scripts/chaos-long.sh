#!/usr/bin/env bash
# The long fault-injection run of RELIABILITY.md: 10,000 payments, 6 worker
# processes, every fault kind (SIGKILL, SIGSTOP past the lease, immediate
# restarts of a private Postgres cluster, latency, resets and blackholes
# through Toxiproxy), several minutes; then the same workload on SQLite
# with the faults SQLite has. Prints one JSON report per run.
set -euo pipefail
cd "$(dirname "$0")/.."

seed="${CHAOS_SEED:-7}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/chaos" ./cmd/chaos

echo "--- chaos long: Postgres, private cluster (seed $seed)"
"$work/chaos" --backend postgres --pg-private --seed "$seed" --payments 10000 --workers 6 \
	--duration 4m --fault-every 3s --drain 2m --json
if [ "${CHAOS_LONG_SQLITE:-1}" = 1 ]; then
	echo "--- chaos long: SQLite (seed $seed)"
	"$work/chaos" --backend sqlite --seed "$seed" --payments 10000 --workers 6 \
		--duration 4m --fault-every 3s --drain 2m --json
fi

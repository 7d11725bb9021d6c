#!/usr/bin/env bash
# The test command: vet and the whole test suite with the race detector,
# against real PostgreSQL and SQLite. It makes sure PostgreSQL is reachable
# first (see DEVELOPERS.md): it starts an installed but stopped server, or
# installs one with apt-get when running as root, or stops with one line
# saying what to install. Chromium, for the dashboard's browser test, the same.
set -euo pipefail
cd "$(dirname "$0")/.."

export LEASEHOLD_TEST_POSTGRES_URL="${LEASEHOLD_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"

scripts/ensure-postgres.sh
scripts/ensure-mariadb.sh
scripts/ensure-chromium.sh
scripts/ensure-pgbouncer.sh

echo "--- go vet"
go vet ./...
echo "--- go test -race"
# The race detector stays on everywhere. Its pointer checks (checkptr) are
# turned off: they make the pure-Go SQLite, which is machine-translated C
# full of pointer arithmetic, about twenty times slower (DEVELOPERS.md).
# The timeout is per package: the postgres package runs the conformance
# suite once per pgx exec mode, about 15 minutes under -race on a slow day.
go test -race -gcflags=all=-d=checkptr=0 -count=1 -timeout 40m "$@" ./...
scripts/chaos-smoke.sh  # fault-injection runs and fuzz targets (RELIABILITY.md)
scripts/chaos-failover.sh  # a Patroni failover under load: sync replication, primary SIGKILLed (~1 min)
scripts/demo-failover.sh   # the payments demo through the same failover (~40 s)
(cd bench && go test -count=1 -timeout 10m ./...)

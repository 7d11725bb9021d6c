#!/usr/bin/env bash
# Makes sure PgBouncer is installed for the tests that run the client through
# it in transaction mode (the tests start and stop their own private
# PgBouncer on a free loopback port): installs Debian's pgbouncer package
# with apt-get when running as root, or stops with one line saying what to
# install. The package's own service is never left running.
set -euo pipefail
if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "--- installing PgBouncer with apt-get (pooler tests)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq pgbouncer >/dev/null
	# Without systemd the package starts nothing; stop its service where it did.
	if [ -r /run/postgresql/pgbouncer.pid ]; then
		kill "$(cat /run/postgresql/pgbouncer.pid)" 2>/dev/null || true
	fi
	[ -x /usr/sbin/pgbouncer ] && exit 0
fi
echo "error: pgbouncer is not installed; install it (Debian: apt-get install pgbouncer) for the PgBouncer tests" >&2
exit 1

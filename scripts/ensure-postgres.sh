#!/usr/bin/env bash
# Makes sure the PostgreSQL server for the tests is reachable at
# LEASEHOLD_TEST_POSTGRES_URL (default: postgres@127.0.0.1:5432, database test).
# A custom URL is only checked, never started or installed.
set -euo pipefail

default_url="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
url="${LEASEHOLD_TEST_POSTGRES_URL:-$default_url}"

reachable() {
	command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p 5432 -t 2
}

if [ "$url" != "$default_url" ]; then
	exit 0
fi

if ! reachable; then
	if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
			echo "--- installing PostgreSQL with apt-get"
			export DEBIAN_FRONTEND=noninteractive
			apt-get update -qq >/dev/null
			apt-get install -y -qq postgresql >/dev/null
		else
			echo "error: PostgreSQL is not installed and not reachable at 127.0.0.1:5432; install it (Debian: apt-get install postgresql) or set LEASEHOLD_TEST_POSTGRES_URL" >&2
			exit 1
		fi
	fi
	version=$(ls /etc/postgresql | sort -n | tail -n 1)
	hba="/etc/postgresql/$version/main/pg_hba.conf"
	# The tests connect over loopback as postgres without a password.
	if [ -w "$hba" ] && ! grep -qE '^host\s+all\s+all\s+127\.0\.0\.1/32\s+trust' "$hba"; then
		sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
	fi
	echo "--- starting PostgreSQL $version"
	pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
	for _ in $(seq 1 30); do
		reachable && break
		sleep 1
	done
	if ! reachable; then
		echo "error: PostgreSQL $version did not start on 127.0.0.1:5432; see /var/log/postgresql" >&2
		exit 1
	fi
fi

# The test database.
if ! psql -h 127.0.0.1 -U postgres -d test -Atc 'select 1' >/dev/null 2>&1; then
	psql -h 127.0.0.1 -U postgres -d postgres -qc 'CREATE DATABASE test' >/dev/null
fi

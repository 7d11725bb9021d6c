#!/usr/bin/env bash
# Makes sure the MariaDB (or MySQL) server for the tests is reachable at
# LEASEHOLD_TEST_MYSQL_URL (default: root without a password over TCP at
# 127.0.0.1:3306, database test). It starts an installed but stopped
# mariadbd, installs Debian's mariadb-server with apt-get when running as root
# and it is missing, lets root log in over TCP without a password, creates the
# test database and raises max_connections for the parallel tests. A custom
# URL is only checked by the tests, never started or installed.
set -euo pipefail

if [ -n "${LEASEHOLD_TEST_MYSQL_URL:-}" ]; then
	exit 0
fi

client=$(command -v mariadb || command -v mysql || true)

tcp() {
	[ -n "$client" ] && "$client" --protocol=TCP -h 127.0.0.1 -P 3306 -u root --connect-timeout=2 "$@"
}

reachable() {
	tcp -e 'SELECT 1' >/dev/null 2>&1
}

listening() {
	# Up, though perhaps refusing root over TCP: the server answers at all.
	[ -n "$client" ] && "$client" --protocol=TCP -h 127.0.0.1 -P 3306 -u root --connect-timeout=2 -e 'SELECT 1' 2>&1 |
		grep -qiE 'access denied|ERROR 1045|ERROR 1698|^1$'
}

if ! reachable; then
	if [ ! -x /usr/sbin/mariadbd ] && [ ! -x /usr/sbin/mysqld ]; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
			echo "--- installing MariaDB with apt-get"
			export DEBIAN_FRONTEND=noninteractive
			apt-get update -qq >/dev/null
			apt-get install -y -qq mariadb-server >/dev/null
			client=$(command -v mariadb || command -v mysql)
		else
			echo "error: MariaDB is not installed and not reachable at 127.0.0.1:3306; install it (Debian: apt-get install mariadb-server) or set LEASEHOLD_TEST_MYSQL_URL" >&2
			exit 1
		fi
	fi
	if ! listening; then
		echo "--- starting MariaDB"
		server=/usr/sbin/mariadbd
		[ -x "$server" ] || server=/usr/sbin/mysqld
		mkdir -p /run/mysqld
		chown mysql:mysql /run/mysqld 2>/dev/null || true
		start-stop-daemon --start --oknodo --background --exec "$server" >/dev/null 2>&1 ||
			service mariadb start >/dev/null 2>&1 || service mysql start >/dev/null 2>&1 || true
		for _ in $(seq 1 30); do
			listening && break
			sleep 1
		done
		if ! listening; then
			echo "error: MariaDB did not start on 127.0.0.1:3306; see /var/log/mysql or the journal" >&2
			exit 1
		fi
	fi
	if ! reachable; then
		# A fresh Debian install lets root in only through the socket, as the
		# system's root: allow the tests in over loopback without a password.
		"$client" -u root -e "
			CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
			GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
			FLUSH PRIVILEGES;" >/dev/null 2>&1 || true
	fi
	if ! reachable; then
		echo "error: MariaDB at 127.0.0.1:3306 refuses root without a password over TCP; allow it or set LEASEHOLD_TEST_MYSQL_URL" >&2
		exit 1
	fi
fi

# The test database; each test makes its own database beside it.
tcp -e 'CREATE DATABASE IF NOT EXISTS test' >/dev/null
# The suite runs many tests at once, each with a small pool of its own.
if [ "$(tcp -N -e 'SELECT @@max_connections')" -lt 500 ]; then
	tcp -e 'SET GLOBAL max_connections = 500' >/dev/null || true
fi

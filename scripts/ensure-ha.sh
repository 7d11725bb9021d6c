#!/usr/bin/env bash
# Makes sure Patroni, etcd and HAProxy are installed for scripts/ha-cluster.sh
# (Debian: patroni, python3-etcd, etcd-server, haproxy). As root with apt-get, installs them
# without letting the packages start their system services (a temporary
# policy-rc.d refuses every start), then stops by PID anything of theirs
# that runs anyway, so no daemon of the packages holds a port. Otherwise
# prints one line saying what to install and exits non-zero.
set -euo pipefail

have() {
	command -v patroni >/dev/null 2>&1 && command -v patronictl >/dev/null 2>&1 &&
		command -v etcd >/dev/null 2>&1 && command -v haproxy >/dev/null 2>&1 &&
		/usr/bin/python3 -c 'import etcd' >/dev/null 2>&1 # Patroni's etcd client, for the system Python Patroni runs on
}

if have; then
	exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "error: Patroni, etcd and HAProxy are needed; install them (Debian: apt-get install patroni python3-etcd etcd-server haproxy)" >&2
	exit 1
fi

# Processes of the packages' daemons before the install: those are not ours.
daemons() {
	local name
	for name in etcd haproxy patroni; do
		pgrep -x "$name" 2>/dev/null || true
	done
}
before=$(daemons)

policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# ensure-ha.sh: no service starts during the install\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	own_policy=1
fi
cleanup() {
	if [ "$own_policy" = 1 ]; then
		rm -f "$policy"
	fi
}
trap cleanup EXIT

echo "--- installing patroni, python3-etcd, etcd-server and haproxy with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends patroni python3-etcd etcd-server haproxy >/dev/null

# Whatever the install started (an init script run despite policy-rc.d)
# is stopped by PID; processes that ran before are left alone.
for pid in $(daemons); do
	if ! grep -qx "$pid" <<<"$before"; then
		echo "--- stopping $(ps -o comm= -p "$pid" 2>/dev/null || echo process) (pid $pid) started by the package install"
		kill "$pid" 2>/dev/null || true
	fi
done
# Neither service may start at boot either (sysvinit links, if any).
if command -v update-rc.d >/dev/null 2>&1; then
	for svc in etcd haproxy patroni; do
		if [ -e "/etc/init.d/$svc" ]; then
			update-rc.d "$svc" disable >/dev/null 2>&1 || true
		fi
	done
fi

if ! have; then
	echo "error: patroni, python3-etcd, etcd-server and haproxy were installed but patroni, patronictl, etcd, haproxy or Python's etcd module is missing" >&2
	exit 1
fi

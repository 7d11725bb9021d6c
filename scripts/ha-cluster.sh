#!/usr/bin/env bash
# A throwaway highly available Postgres for failover tests: three Patroni
# nodes, a single-node etcd, and HAProxy routing a read-write port to the
# leader. Everything listens on 127.0.0.1, on private ports derived from
# --base-port, with its data in one directory; every process runs as the
# postgres OS user and is stopped by PID.
#
#	scripts/ha-cluster.sh up [--sync|--async] [--dir DIR] [--base-port N] [--db NAME]
#	scripts/ha-cluster.sh status [--dir DIR] [--base-port N]
#	scripts/ha-cluster.sh start-node I [--dir DIR] [--base-port N]   restart node I (1-3) after a kill
#	scripts/ha-cluster.sh down [--dir DIR] [--base-port N]
#
# Ports, from the base B (default 25432: below Linux's ephemeral range,
# 32768-60999, so that no outgoing connection's local port holds one when
# a listener binds it): Postgres B, B+1, B+2; Patroni's REST API B+10,
# B+11, B+12; etcd clients B+20, peers B+21; HAProxy's
# read-write port B+30. The directory defaults to /tmp/leasehold-ha-B.
# `up` prints the connection URLs and writes them, with the ports, paths and
# every PID, to DIR/ha.env (KEY=value lines). A failed `up` cleans up after
# itself; `down` is safe to run at any time.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cmd="${1:-}"
[ $# -gt 0 ] && shift
mode=sync
base=25432
dir=""
db=test
node=""
while [ $# -gt 0 ]; do
	case "$1" in
	--sync) mode=sync ;;
	--async) mode=async ;;
	--dir) dir="$2"; shift ;;
	--dir=*) dir="${1#--dir=}" ;;
	--base-port) base="$2"; shift ;;
	--base-port=*) base="${1#--base-port=}" ;;
	--db) db="$2"; shift ;;
	[1-3]) node="$1" ;;
	*) echo "error: ha-cluster.sh: unknown argument $1 (usage: up|down|status|start-node I [--sync|--async] [--dir DIR] [--base-port N] [--db NAME])" >&2; exit 2 ;;
	esac
	shift
done
case "$base" in
'' | *[!0-9]*) echo "error: --base-port must be a number" >&2; exit 2 ;;
esac
if [ "$base" -lt 1024 ] || [ "$base" -gt 65000 ]; then
	echo "error: --base-port must be 1024 to 65000" >&2
	exit 2
fi
case "$db" in
'' | *[!a-z0-9_]*) echo "error: --db must be lowercase letters, digits and underscores" >&2; exit 2 ;;
esac
dir="${dir:-${TMPDIR:-/tmp}/leasehold-ha-$base}"
dir="$(realpath -m "$dir")"
marker="$dir/.leasehold-ha" # only a directory with this file is ever removed
scope=leasehold-ha
etcd_client=$((base + 20))
etcd_peer=$((base + 21))
haproxy_rw=$((base + 30))
pg_port() { echo $((base + $1 - 1)); }
rest_port() { echo $((base + 9 + $1)); }

log() { echo "--- ha-cluster: $*" >&2; }
die() {
	echo "error: ha-cluster.sh: $*" >&2
	exit 1
}

# The unprivileged user every process runs as when we are root.
as_pg=()
if [ "$(id -u)" = 0 ]; then
	id postgres >/dev/null 2>&1 || die "running as root and there is no postgres OS user to run the cluster as"
	as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups)
fi

# alive_ours PIDFILE: the PID in PIDFILE, if that process runs and its
# command line names our directory (so a reused PID is never signalled).
alive_ours() {
	local f=$1 pid
	[ -s "$f" ] || return 1
	pid=$(head -n 1 "$f")
	case "$pid" in '' | *[!0-9]*) return 1 ;; esac
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir" || return 1
	echo "$pid"
}

# postmaster_pid I: the running postmaster of node I, if any. Its command
# line holds the data directory, inside ours.
postmaster_pid() { alive_ours "$dir/node$1/data/postmaster.pid"; }

# stop_pid PID NAME TIMEOUT: SIGTERM, then SIGKILL after TIMEOUT seconds.
stop_pid() {
	local pid=$1 name=$2 timeout=$3 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < timeout * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	log "$name (pid $pid) still running after ${timeout}s; SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	echo "error: ha-cluster.sh: $name (pid $pid) survived SIGKILL" >&2
}

# start NAME PIDFILE LOG CMD...: runs CMD as postgres in its own session,
# detached from our terminal; PIDFILE gets the PID of CMD itself.
start() {
	local name=$1 pidfile=$2 logfile=$3 i
	shift 3
	rm -f "$pidfile"
	setsid sh -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "${as_pg[@]}" env HOME="$dir" "$@" \
		>>"$logfile" 2>&1 </dev/null &
	for ((i = 0; i < 50; i++)); do
		[ -s "$pidfile" ] && return 0
		sleep 0.1
	done
	die "$name did not start (see $logfile)"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pg_bin() {
	local b
	b=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n | tail -n 1)
	if [ -z "$b" ] || [ ! -x "$b/postgres" ]; then
		die "no Postgres server binaries in /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)"
	fi
	echo "$b"
}

# wait_for SECONDS WHAT CMD...: runs CMD every 0.5 s until it succeeds.
wait_for() {
	local timeout=$1 what=$2 deadline
	shift 2
	deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "error: ha-cluster.sh: timed out after ${timeout}s waiting for $what" >&2
			return 1
		fi
		sleep 0.5
	done
}

psql_at() { # PORT SQL...
	local port=$1
	shift
	PGCONNECT_TIMEOUT=3 psql -X -h 127.0.0.1 -p "$port" -U postgres -d postgres -Atqc "$@"
}

leader() { # prints the node number of the leader, per Patroni's REST API
	local i
	for i in 1 2 3; do
		if curl -fsS -m 1 -o /dev/null "http://127.0.0.1:$(rest_port "$i")/primary"; then
			echo "$i"
			return 0
		fi
	done
	return 1
}

haproxy_routes_to_leader() {
	[ "$(psql_at "$haproxy_rw" 'select pg_is_in_recovery()')" = f ]
}

replicas_streaming() { # PORT WANT
	[ "$(psql_at "$1" "select count(*) from pg_stat_replication where state = 'streaming'")" -ge "$2" ]
}

sync_standby() { # PORT
	[ "$(psql_at "$1" "select count(*) from pg_stat_replication where sync_state = 'sync'")" -ge 1 ]
}

write_patroni_config() { # I BIN
	local i=$1 bin=$2 sync_mode=false lag=1048576
	if [ "$mode" = sync ]; then
		sync_mode=true
	else
		# With async replication a failover after a replication freeze must
		# still happen (the tests measure what it loses), however far the
		# replicas lag.
		lag=1073741824
	fi
	mkdir -p "$dir/node$i"
	cat >"$dir/node$i/patroni.yml" <<EOF
scope: $scope
namespace: /leasehold/
name: node$i
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$(rest_port "$i")
  connect_address: 127.0.0.1:$(rest_port "$i")
etcd3:
  hosts: 127.0.0.1:$etcd_client
bootstrap:
  dcs:
    # A failover within seconds: loop_wait + 2 * retry_timeout < ttl.
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: $lag
    synchronous_mode: $sync_mode
    synchronous_mode_strict: false
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_connections: 300
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        synchronous_commit: "on"
        shared_buffers: 64MB
  initdb:
    - encoding: UTF8
    - locale: C
    - auth: trust
postgresql:
  listen: 127.0.0.1:$(pg_port "$i")
  connect_address: 127.0.0.1:$(pg_port "$i")
  data_dir: $dir/node$i/data
  bin_dir: $bin
  pgpass: $dir/node$i/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: $dir/node$i
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
watchdog:
  mode: "off"
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOF
}

write_haproxy_config() {
	local i
	{
		cat <<EOF
global
    maxconn 500
defaults
    mode tcp
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 1s
# Read-write: the node whose Patroni answers 200 on /primary, the leader.
# A node marked down has its sessions cut at once, so no client keeps
# writing to a demoted primary.
listen postgres_rw
    bind 127.0.0.1:$haproxy_rw
    option httpchk
    http-check send meth GET uri /primary
    http-check expect status 200
    default-server inter 500ms fastinter 250ms downinter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
EOF
		for i in 1 2 3; do
			echo "    server node$i 127.0.0.1:$(pg_port "$i") check port $(rest_port "$i")"
		done
	} >"$dir/haproxy.cfg"
}

start_node() { # I
	local i=$1
	if alive_ours "$dir/node$i/patroni.pid" >/dev/null; then
		return 0
	fi
	start "patroni node$i" "$dir/node$i/patroni.pid" "$dir/node$i/patroni.log" patroni "$dir/node$i/patroni.yml"
}

# kv KEY VALUE: one line of the state file, quoted for the shell (values
# hold no single quote); the chaos harness reads the same lines.
kv() { printf "%s='%s'\n" "$1" "$2"; }

write_state() {
	local i multi=""
	for i in 1 2 3; do
		multi="${multi:+$multi,}127.0.0.1:$(pg_port "$i")"
	done
	{
		kv "HA_DIR" "$dir"
		kv "HA_MODE" "$mode"
		kv "HA_SCOPE" "$scope"
		kv "HA_SCRIPT" "$here/ha-cluster.sh"
		kv "HA_BASE_PORT" "$base"
		kv "HA_DB" "$db"
		kv "HA_HAPROXY_URL" "postgres://postgres@127.0.0.1:$haproxy_rw/$db?sslmode=disable"
		kv "HA_MULTIHOST_URL" "postgres://postgres@$multi/$db?target_session_attrs=read-write&sslmode=disable"
		kv "HA_ETCD" "127.0.0.1:$etcd_client"
		kv "HA_ETCD_PID" "$(alive_ours "$dir/etcd.pid" || true)"
		kv "HA_HAPROXY_PID" "$(alive_ours "$dir/haproxy.pid" || true)"
		for i in 1 2 3; do
			kv "HA_NODE${i}_PG_PORT" "$(pg_port "$i")"
			kv "HA_NODE${i}_REST_PORT" "$(rest_port "$i")"
			kv "HA_NODE${i}_CONFIG" "$dir/node$i/patroni.yml"
			kv "HA_NODE${i}_DATA" "$dir/node$i/data"
			kv "HA_NODE${i}_PATRONI_PIDFILE" "$dir/node$i/patroni.pid"
			kv "HA_NODE${i}_PATRONI_PID" "$(alive_ours "$dir/node$i/patroni.pid" || true)"
			kv "HA_NODE${i}_POSTMASTER_PID" "$(postmaster_pid "$i" || true)"
		done
	} >"$dir/ha.env.tmp"
	mv "$dir/ha.env.tmp" "$dir/ha.env"
}

do_down() {
	local i pid child
	if [ ! -e "$dir" ]; then
		return 0
	fi
	if [ ! -e "$marker" ]; then
		die "$dir is not a directory ha-cluster.sh made (no .leasehold-ha in it); not touching it"
	fi
	if pid=$(alive_ours "$dir/haproxy.pid"); then
		stop_pid "$pid" haproxy 5
	fi
	# Patroni stops its Postgres on SIGTERM; all three at once.
	for i in 1 2 3; do
		if pid=$(alive_ours "$dir/node$i/patroni.pid"); then
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	for i in 1 2 3; do
		if pid=$(alive_ours "$dir/node$i/patroni.pid"); then
			stop_pid "$pid" "patroni node$i" 30
		fi
	done
	# A postmaster left behind (its Patroni was killed): its children first.
	for i in 1 2 3; do
		if pid=$(postmaster_pid "$i"); then
			kill -QUIT "$pid" 2>/dev/null || true # immediate shutdown
			sleep 1
			for child in $(pgrep -P "$pid" 2>/dev/null || true); do
				kill -KILL "$child" 2>/dev/null || true
			done
			stop_pid "$pid" "postmaster node$i" 5
		fi
	done
	if pid=$(alive_ours "$dir/etcd.pid"); then
		stop_pid "$pid" etcd 10
	fi
	rm -rf "$dir"
	log "down: stopped and removed $dir"
}

do_up() {
	local bin i p l
	"$here/ensure-ha.sh"
	bin=$(pg_bin)
	if [ -e "$dir/ha.env" ] && alive_ours "$dir/etcd.pid" >/dev/null; then
		die "a cluster already runs in $dir; run: $0 down --dir $dir"
	fi
	if [ -e "$dir" ]; then
		log "cleaning up what a previous run left in $dir"
		do_down
	fi
	for p in $(pg_port 1) $(pg_port 2) $(pg_port 3) $(rest_port 1) $(rest_port 2) $(rest_port 3) $etcd_client $etcd_peer $haproxy_rw; do
		if port_in_use "$p"; then
			die "port $p on 127.0.0.1 is in use; pick another --base-port"
		fi
	done
	mkdir -p "$dir"
	touch "$marker"
	trap 'rc=$?; if [ $rc != 0 ]; then up_failed; fi' EXIT

	log "up: $mode replication, Postgres $(basename "$(dirname "$bin")"), in $dir"
	for i in 1 2 3; do
		write_patroni_config "$i" "$bin"
	done
	write_haproxy_config
	mkdir -p "$dir/etcd"
	if [ "${#as_pg[@]}" -gt 0 ]; then
		chown -R postgres:postgres "$dir"
	fi
	chmod 700 "$dir/etcd"

	start etcd "$dir/etcd.pid" "$dir/etcd.log" etcd --name etcd0 --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
		--listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
		--initial-cluster "etcd0=http://127.0.0.1:$etcd_peer" --initial-cluster-state new \
		--initial-cluster-token "$scope-$base"
	wait_for 30 "etcd on 127.0.0.1:$etcd_client (see $dir/etcd.log)" curl -fsS -m 1 "http://127.0.0.1:$etcd_client/health"

	for i in 1 2 3; do
		start_node "$i"
	done
	start haproxy "$dir/haproxy.pid" "$dir/haproxy.log" haproxy -db -f "$dir/haproxy.cfg"

	wait_for 90 "a Patroni leader (see $dir/node*/patroni.log)" leader
	l=$(leader)
	log "leader: node$l"
	wait_for 90 "two replicas streaming from node$l" replicas_streaming "$(pg_port "$l")" 2
	if [ "$mode" = sync ]; then
		wait_for 60 "a synchronous standby of node$l" sync_standby "$(pg_port "$l")"
	fi
	wait_for 30 "HAProxy on 127.0.0.1:$haproxy_rw routing to the leader (see $dir/haproxy.log)" haproxy_routes_to_leader
	if [ "$(psql_at "$haproxy_rw" "select count(*) from pg_database where datname = '$db'")" = 0 ]; then
		psql_at "$haproxy_rw" "CREATE DATABASE $db" >/dev/null
	fi
	write_state
	trap - EXIT
	# shellcheck disable=SC1091
	. "$dir/ha.env"
	echo "HAProxy (read-write):  $HA_HAPROXY_URL"
	echo "libpq multi-host:      $HA_MULTIHOST_URL"
	echo "state:                 $dir/ha.env"
}

up_failed() {
	local f
	echo "error: ha-cluster.sh: up failed; last lines of the logs:" >&2
	for f in "$dir"/etcd.log "$dir"/node*/patroni.log "$dir"/haproxy.log; do
		if [ -s "$f" ]; then
			echo "== $f" >&2
			tail -n 8 "$f" >&2
		fi
	done
	do_down || true
}

case "$cmd" in
up) do_up ;;
down) do_down ;;
status)
	[ -e "$dir/node1/patroni.yml" ] || die "no cluster in $dir"
	patronictl -c "$dir/node1/patroni.yml" list
	;;
start-node)
	[ -n "$node" ] || die "start-node needs a node number, 1 to 3"
	[ -e "$dir/ha.env" ] || die "no cluster in $dir"
	start_node "$node"
	mode=$(sed -n 's/^HA_MODE=//p' "$dir/ha.env")
	db=$(sed -n 's/^HA_DB=//p' "$dir/ha.env")
	write_state
	;;
*)
	echo "usage: ha-cluster.sh up|down|status|start-node I [--sync|--async] [--dir DIR] [--base-port N] [--db NAME]" >&2
	exit 2
	;;
esac

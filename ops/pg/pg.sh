#!/usr/bin/env bash
# ops/pg/pg.sh -- a private PostgreSQL cluster for paysvc development and tests.
#
# Usage: ops/pg/pg.sh <command> [args]
#
#   start    install the server if needed, create the cluster if needed, start it
#            (no-op if it is already running), wait until it accepts connections
#            and create the "paysvc" database if it is missing
#   stop     fast shutdown (no-op if not running)
#   status   exit 0 if running (prints one line), 3 if not
#   url      print the connection URL (does not start anything)
#   psql     run psql against the paysvc database; extra args go to psql
#   log      print the tail of the server log (-f to follow)
#   datadir  print the data directory in use
#   destroy  stop the cluster and delete its data directory
#
# Environment:
#   PAYSVC_DATA_DIR   parent of the cluster directory (default: <repo>/.data;
#                     a relative path is taken relative to the repo root).
#                     The cluster lives in $PAYSVC_DATA_DIR/pg.
#   PAYSVC_PG_PORT    TCP port on 127.0.0.1 (default 55432)
#   PAYSVC_PG_BIN     directory with the server binaries (default: newest
#                     /usr/lib/postgresql/*/bin, matching the cluster's version)
#
# The server runs as the unprivileged "postgres" OS user when this script runs as
# root (PostgreSQL refuses to run as root), otherwise as the invoking user. If the
# postgres user cannot reach $PAYSVC_DATA_DIR (e.g. the repo sits below a mode-700
# directory such as /root) or the path is too long for a unix socket, the cluster
# is kept in /tmp/paysvc-pg-<hash of that path> instead and a note is printed.
#
# Authentication is "trust" and the server listens on 127.0.0.1 only: any local
# user can connect as superuser. Dev/test boxes only.
set -euo pipefail

readonly PROG=pg.sh
readonly PG_OS_USER=postgres
readonly DB_NAME=paysvc
readonly DB_USER=postgres

SCRIPT_PATH=$(readlink -f -- "${BASH_SOURCE[0]}")
REPO_ROOT=$(cd -P -- "$(dirname -- "$SCRIPT_PATH")/../.." && pwd -P)
readonly SCRIPT_PATH REPO_ROOT

PORT=${PAYSVC_PG_PORT:-55432}

note() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

[[ $PORT =~ ^[0-9]+$ ]] && ((PORT >= 1 && PORT <= 65535)) ||
	die "PAYSVC_PG_PORT must be a port number, got '$PORT'"

# DATA_ROOT: the directory that holds the cluster directory "pg".
data_root() {
	local d=${PAYSVC_DATA_DIR:-.data}
	[[ $d == /* ]] || d=$REPO_ROOT/$d
	realpath -m -- "$d"
}
DATA_ROOT=$(data_root)
readonly DATA_ROOT
INTENDED_PGDATA=$DATA_ROOT/pg
FALLBACK_PGDATA=/tmp/paysvc-pg-$(printf '%s' "$INTENDED_PGDATA" | sha256sum | cut -c1-12)
readonly INTENDED_PGDATA FALLBACK_PGDATA

url() { printf 'postgres://%s@127.0.0.1:%s/%s?sslmode=disable\n' "$DB_USER" "$PORT" "$DB_NAME"; }

is_root() { [[ $EUID -eq 0 ]]; }
have_pg_user() { id -u "$PG_OS_USER" >/dev/null 2>&1; }

# as_pg CMD...: run CMD as the server's OS user, from "/" (so that a cwd the
# user cannot access does not produce warnings), with every fd except 0-2
# closed: pg_ctl does not close inherited fds, so the daemonized postmaster
# would otherwise keep our lock file, or a pipe a CI runner waits on, open.
as_pg() {
	(
		cd /
		local fd n
		for fd in /proc/$BASHPID/fd/*; do
			n=${fd##*/}
			[[ $n =~ ^[0-9]+$ ]] && ((n > 2)) && eval "exec $n>&-" 2>/dev/null || true
		done
		if is_root; then
			exec runuser -u "$PG_OS_USER" -- "$@"
		else
			exec "$@"
		fi
	)
}

# ---------------------------------------------------------------- binaries ---

# Newest installed server bin dir, or empty.
newest_bin() {
	local d best='' bestv=0 v
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x $d/initdb && -x $d/postgres && -x $d/pg_ctl ]] || continue
		v=${d#/usr/lib/postgresql/}; v=${v%/bin}
		[[ $v =~ ^[0-9]+$ ]] || continue
		if ((v > bestv)); then best=$d; bestv=$v; fi
	done
	printf '%s' "$best"
}

install_server() {
	is_root || die "PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin/initdb); install the 'postgresql' package or set PAYSVC_PG_BIN"
	command -v apt-get >/dev/null || die "PostgreSQL server binaries not found and apt-get is not available; install PostgreSQL or set PAYSVC_PG_BIN"
	note "PostgreSQL server not found; installing it with apt-get (this takes a minute)..."
	# Ask Debian's postgresql-common not to create (and start) the system-wide
	# "main" cluster on port 5432 that the package would otherwise set up: we
	# only need the binaries. Only done when we are the ones installing.
	if [[ ! -e /etc/postgresql/ ]] && mkdir -p /etc/postgresql-common/createcluster.d 2>/dev/null; then
		[[ -e /etc/postgresql-common/createcluster.d/paysvc.conf ]] ||
			printf '# written by paysvc ops/pg/pg.sh: only the binaries are needed\ncreate_main_cluster = false\n' \
				>/etc/postgresql-common/createcluster.d/paysvc.conf || true
	fi
	local log
	log=$(mktemp /tmp/paysvc-pg-apt.XXXXXX)
	if ! {
		DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 update &&
			DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=300 \
				-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
				install postgresql
	} </dev/null >"$log" 2>&1; then
		tail -n 40 "$log" >&2
		die "apt-get install postgresql failed (full log: $log)"
	fi
	rm -f "$log"
}

# ensure_installed: install the server package when no server binaries exist.
ensure_installed() {
	if [[ -n ${PAYSVC_PG_BIN:-} ]]; then
		[[ -x $PAYSVC_PG_BIN/postgres && -x $PAYSVC_PG_BIN/initdb ]] ||
			die "PAYSVC_PG_BIN=$PAYSVC_PG_BIN does not contain postgres/initdb"
		return 0
	fi
	[[ -n $(newest_bin) ]] || install_server
	[[ -n $(newest_bin) ]] || die "PostgreSQL server binaries still not found in /usr/lib/postgresql/*/bin after installing"
	if is_root && ! have_pg_user; then
		note "creating system user '$PG_OS_USER'"
		useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/bash "$PG_OS_USER" ||
			die "could not create the '$PG_OS_USER' user"
	fi
}

# pick_bin: sets BIN, preferring binaries matching the cluster's major version.
pick_bin() {
	if [[ -n ${PAYSVC_PG_BIN:-} ]]; then BIN=$PAYSVC_PG_BIN; return 0; fi
	local v=''
	[[ -r $PGDATA/PG_VERSION ]] && v=$(<"$PGDATA/PG_VERSION")
	if [[ -n $v && -x /usr/lib/postgresql/$v/bin/postgres ]]; then
		BIN=/usr/lib/postgresql/$v/bin
	else
		BIN=$(newest_bin)
		[[ -n $BIN ]] || die "PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin (run '$PROG start' to install)"
		if [[ -n $v ]]; then
			die "cluster in $PGDATA was created by PostgreSQL $v, but only $BIN is installed; install postgresql-$v or remove the cluster ('$PROG destroy')"
		fi
	fi
}

# ----------------------------------------------------------- data directory ---

# pg_can_reach DIR: can the server's OS user traverse DIR (or, if DIR does not
# exist yet, its nearest existing ancestor; new directories are created 0755)?
pg_can_reach() {
	local d=$1
	while [[ ! -e $d ]]; do d=$(dirname -- "$d"); done
	if is_root; then
		have_pg_user || return 0 # nothing to check against yet
		runuser -u "$PG_OS_USER" -- test -d "$d" -a -x "$d" 2>/dev/null
	else
		[[ -d $d && -x $d ]]
	fi
}

# choose_pgdata: sets PGDATA to the intended directory if usable, else to the
# /tmp fallback. Deterministic, so every subcommand agrees on the location.
choose_pgdata() {
	local why=''
	# unix socket lives in the data dir: sun_path is 108 bytes including NUL.
	if ((${#INTENDED_PGDATA} + ${#PORT} + 11 > 100)); then
		why="its path is too long for a unix socket"
	elif ! pg_can_reach "$DATA_ROOT"; then
		why="user '$PG_OS_USER' cannot reach $DATA_ROOT (a parent directory is not traversable)"
	fi
	if [[ -z $why ]]; then
		PGDATA=$INTENDED_PGDATA
		FALLBACK_REASON=''
	else
		PGDATA=$FALLBACK_PGDATA
		FALLBACK_REASON=$why
	fi
}

# cluster_owner_ok: refuse a /tmp fallback dir that someone else planted.
check_fallback_owner() {
	[[ $PGDATA == "$FALLBACK_PGDATA" && -e $PGDATA ]] || return 0
	[[ ! -L $PGDATA ]] || die "$PGDATA is a symlink; refusing to use it"
	local owner
	owner=$(stat -c %U -- "$PGDATA")
	if is_root; then
		[[ $owner == "$PG_OS_USER" || $owner == root ]] || die "$PGDATA is owned by '$owner'; refusing to use it"
	else
		[[ $owner == "$(id -un)" ]] || die "$PGDATA is owned by '$owner'; refusing to use it"
	fi
}

# ------------------------------------------------------------ process state ---

# pid_alive PID: a live (non-zombie) process? Zombies matter: in containers
# whose PID 1 does not reap children, a SIGKILLed postmaster stays a zombie
# forever, and kill -0 (as used by pg_ctl and postgres) still "sees" it.
pid_alive() {
	local st
	if st=$(cat "/proc/$1/stat" 2>/dev/null); then
		st=${st##*) }
		[[ ${st%% *} != Z ]]
	else
		kill -0 "$1" 2>/dev/null
	fi
}

# running_pid: print the postmaster PID if OUR cluster is running, else fail.
# Checks that the PID from postmaster.pid is a postgres process whose cwd is our
# data directory, so a stale file whose PID got reused is not mistaken for a server.
running_pid() {
	local f=$PGDATA/postmaster.pid pid real cwd exe
	[[ -r $f ]] || return 1
	pid=$(head -n1 -- "$f" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	pid_alive "$pid" || return 1
	real=$(realpath -- "$PGDATA")
	if cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) && exe=$(readlink "/proc/$pid/exe" 2>/dev/null); then
		[[ $cwd == "$real" && $exe == */postgres* ]] || return 1
	fi
	printf '%s\n' "$pid"
}

# running_port PID-file: the port recorded in postmaster.pid (line 4).
running_port() { sed -n 4p -- "$PGDATA/postmaster.pid" 2>/dev/null; }

# orphans: leftover server processes (cwd = data dir) of a killed postmaster.
orphans() {
	local real d cwd exe
	real=$(realpath -- "$PGDATA")
	for d in /proc/[0-9]*; do
		cwd=$(readlink "$d/cwd" 2>/dev/null) || continue
		[[ $cwd == "$real" ]] || continue
		exe=$(readlink "$d/exe" 2>/dev/null) || continue
		[[ $exe == */postgres* ]] || continue
		printf '%s\n' "${d#/proc/}"
	done
}

# clear_stale_state: called with the lock held when our server is not running.
clear_stale_state() {
	local pids i
	# Children of a SIGKILLed postmaster keep the old shared memory attached for a
	# moment; a new postmaster refuses to start while they live.
	for ((i = 0; i < 100; i++)); do
		pids=$(orphans)
		[[ -n $pids ]] || break
		((i == 0)) && note "waiting for leftover server processes to exit: $(echo $pids)"
		sleep 0.1
	done
	if [[ -n $pids ]]; then
		note "killing leftover server processes: $(echo $pids)"
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		sleep 0.5
	fi
	# Our server is not running. A postmaster.pid (or socket lock file) whose PID
	# still answers kill -0 -- a zombie left by a killed postmaster, or a reused
	# PID -- makes postgres refuse to start ("lock file already exists"); remove
	# those. Files with a dead PID are left to postgres, which cleans up itself.
	local f pid
	for f in "$PGDATA/postmaster.pid" "$PGDATA"/.s.PGSQL.*.lock; do
		[[ -f $f ]] || continue
		pid=$(head -n1 -- "$f" 2>/dev/null || true)
		pid=${pid#-}
		if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
			note "removing stale $(basename -- "$f") (PID $pid is not a running server of this cluster)"
			rm -f -- "$f"
		fi
	done
}

# ------------------------------------------------------------------ locking ---

LOCK_FD=''
take_lock() {
	[[ -d $DATA_ROOT && -w $DATA_ROOT ]] || return 0
	command -v flock >/dev/null || return 0
	exec {LOCK_FD}>>"$DATA_ROOT/.pg.lock"
	flock -w 300 "$LOCK_FD" || die "timed out waiting for $DATA_ROOT/.pg.lock (another pg.sh running?)"
}

# ------------------------------------------------------------------- start ---

write_conf() {
	local f=$PGDATA/paysvc.conf tmp q
	q=${PGDATA//\'/\'\'}
	tmp=$(mktemp "$PGDATA/.paysvc.conf.XXXXXX")
	cat >"$tmp" <<EOF
# Managed by ops/pg/pg.sh and rewritten on every start: do not edit.
# (Use ALTER SYSTEM for local tweaks: postgresql.auto.conf is read after this.)
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$q'
max_connections = 200
shared_buffers = 256MB
fsync = on
synchronous_commit = on
full_page_writes = on
EOF
	chmod 0600 "$tmp"
	is_root && chown "$PG_OS_USER:" "$tmp"
	mv -f -- "$tmp" "$f"
	grep -qx "include = 'paysvc.conf'" "$PGDATA/postgresql.conf" ||
		printf "\n# paysvc dev settings (ops/pg/pg.sh)\ninclude = 'paysvc.conf'\n" >>"$PGDATA/postgresql.conf"
}

init_cluster() {
	local parent tmp log
	parent=$(dirname -- "$PGDATA")
	# Leftovers of an interrupted init (we hold the lock, so nobody else is initializing).
	find "$parent" -maxdepth 1 -name ".$(basename -- "$PGDATA").init.*" -type d \
		\( -user "$(id -un)" -o -user "$PG_OS_USER" \) -exec rm -rf -- {} + 2>/dev/null || true
	if [[ -e $PGDATA ]]; then
		[[ -d $PGDATA && -z $(ls -A -- "$PGDATA") ]] ||
			die "$PGDATA exists but is not a PostgreSQL cluster (no PG_VERSION); move it away or run '$PROG destroy'"
		rmdir -- "$PGDATA"
	fi
	# initdb into a temporary sibling and rename, so an interrupted init never
	# leaves a half-built cluster behind.
	tmp=$(mktemp -d "$parent/.$(basename -- "$PGDATA").init.XXXXXX")
	chmod 0700 "$tmp"
	is_root && chown "$PG_OS_USER:" "$tmp"
	log=$(mktemp /tmp/paysvc-pg-initdb.XXXXXX)
	if ! as_pg "$BIN/initdb" -D "$tmp" -A trust -U "$DB_USER" --encoding=UTF8 --locale=C \
		</dev/null >"$log" 2>&1; then
		cat "$log" >&2
		rm -rf -- "$tmp"
		die "initdb failed"
	fi
	rm -f -- "$log"
	mv -- "$tmp" "$PGDATA"
	note "initialized PostgreSQL $(<"$PGDATA/PG_VERSION") cluster in $PGDATA"
}

fix_ownership() {
	is_root || return 0
	local owner mode
	owner=$(stat -c %U -- "$PGDATA")
	if [[ $owner != "$PG_OS_USER" ]]; then
		note "chowning $PGDATA to $PG_OS_USER (was owned by $owner)"
		chown -R "$PG_OS_USER:" -- "$PGDATA"
	fi
	mode=$(stat -c %a -- "$PGDATA")
	[[ $mode == 700 || $mode == 750 ]] || chmod 0700 -- "$PGDATA"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

wait_ready() {
	local i
	for ((i = 0; i < 300; i++)); do
		"$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -U "$DB_USER" -d postgres -t 2 && return 0
		sleep 0.2
	done
	die "server did not become ready on 127.0.0.1:$PORT; see $PGDATA/server.log"
}

psql_admin() {
	PGCONNECT_TIMEOUT=10 "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U "$DB_USER" -d postgres "$@" </dev/null
}

ensure_db() {
	local have
	have=$(psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")
	[[ $have == 1 ]] || psql_admin -c "CREATE DATABASE $DB_NAME"
}

cmd_start() {
	umask 022
	ensure_installed
	mkdir -p -- "$DATA_ROOT"
	choose_pgdata
	take_lock
	check_fallback_owner
	if [[ -n $FALLBACK_REASON ]] && ! running_pid >/dev/null; then
		note "note: cannot use $INTENDED_PGDATA: $FALLBACK_REASON;"
		note "note: using $PGDATA instead (lost on reboot; '$PROG destroy' removes it)"
	fi
	if [[ ! -f $PGDATA/PG_VERSION ]]; then
		BIN=${PAYSVC_PG_BIN:-$(newest_bin)}
		init_cluster
	fi
	fix_ownership
	pick_bin

	local pid
	if pid=$(running_pid); then
		local p
		p=$(running_port)
		[[ $p == "$PORT" ]] ||
			die "cluster in $PGDATA is already running on port $p, not $PORT; run '$PROG stop' first"
	else
		clear_stale_state
		write_conf
		if port_in_use; then
			die "something else is already listening on 127.0.0.1:$PORT (another checkout's cluster?); stop it or set PAYSVC_PG_PORT"
		fi
		# keep the log from growing without bound
		if [[ -f $PGDATA/server.log ]] && (($(stat -c %s -- "$PGDATA/server.log") > 50 * 1024 * 1024)); then
			mv -f -- "$PGDATA/server.log" "$PGDATA/server.log.1"
		fi
		local out
		if ! out=$(as_pg "$BIN/pg_ctl" start -D "$PGDATA" -l "$PGDATA/server.log" -w -t 120 -s </dev/null 2>&1); then
			[[ -z $out ]] || printf '%s\n' "$out" >&2
			tail -n 30 -- "$PGDATA/server.log" >&2 2>/dev/null || true
			die "could not start PostgreSQL (log: $PGDATA/server.log)"
		fi
		note "started PostgreSQL $(<"$PGDATA/PG_VERSION") on 127.0.0.1:$PORT (data: $PGDATA)"
	fi
	wait_ready
	ensure_db
}

# -------------------------------------------------------------------- stop ---

locate_existing() {
	choose_pgdata
	check_fallback_owner
}

cmd_stop() {
	locate_existing
	take_lock
	running_pid >/dev/null || return 0
	pick_bin
	if ! as_pg "$BIN/pg_ctl" stop -D "$PGDATA" -m fast -w -t 120 -s </dev/null; then
		note "fast shutdown failed; trying immediate shutdown"
		as_pg "$BIN/pg_ctl" stop -D "$PGDATA" -m immediate -w -t 60 -s </dev/null
	fi
}

cmd_status() {
	locate_existing
	local pid
	if pid=$(running_pid); then
		printf 'running: pid %s, 127.0.0.1:%s, data %s\n' "$pid" "$(running_port)" "$PGDATA"
		return 0
	fi
	printf 'not running (data %s)\n' "$PGDATA"
	return 3
}

cmd_psql() {
	locate_existing
	local psql
	if [[ -n ${PAYSVC_PG_BIN:-} || -f $PGDATA/PG_VERSION || -n $(newest_bin) ]]; then
		pick_bin
		psql=$BIN/psql
	else
		psql=psql
	fi
	exec "$psql" "$(url)" "$@"
}

cmd_log() {
	locate_existing
	[[ -f $PGDATA/server.log ]] || die "no server log at $PGDATA/server.log"
	if [[ ${1:-} == -f ]]; then exec tail -n 50 -F -- "$PGDATA/server.log"; fi
	tail -n "${1:-50}" -- "$PGDATA/server.log"
}

cmd_destroy() {
	cmd_stop
	[[ -e $PGDATA ]] || return 0
	rm -rf -- "$PGDATA"
	note "removed $PGDATA"
}

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$SCRIPT_PATH"
}

main() {
	local cmd=${1:-}
	[[ $# -gt 0 ]] && shift
	case $cmd in
	start) cmd_start ;;
	stop) cmd_stop ;;
	status) cmd_status ;;
	url) url ;;
	psql) cmd_psql "$@" ;;
	log) cmd_log "$@" ;;
	datadir) locate_existing; printf '%s\n' "$PGDATA" ;;
	destroy) cmd_destroy ;;
	-h | --help | help) usage ;;
	'') usage >&2; exit 2 ;;
	*) note "unknown command '$cmd'"; usage >&2; exit 2 ;;
	esac
}

main "$@"

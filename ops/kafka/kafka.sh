#!/usr/bin/env bash
# ops/kafka/kafka.sh -- a private Apache Kafka cluster (KRaft) for paysvc development
# and tests: N combined broker+controller nodes on 127.0.0.1, run from the Maven
# Central jars of ops/kafka/pom.xml (no tarball, no Docker).
#
# Usage: ops/kafka/kafka.sh <command> [args]
#
#   start          resolve the jars if needed, create and format the cluster if needed,
#                  start every node that is not running, wait until each has logged
#                  "Kafka Server started" and accepts TCP on its broker port (120 s at
#                  most), then print the bootstrap servers (host:port,...) on stdout
#                  (the only line on stdout; notes go to stderr). A no-op, except
#                  for that line, when everything is running. On a timeout, or a
#                  node exiting, it prints that node's log and exits 1.
#   stop           SIGTERM every node (controlled shutdown), SIGKILL what is left
#                  after 60 s. No-op if nothing runs.
#   status         one line per node; exit 0 if all run, 1 if some, 3 if none
#   brokers        print the bootstrap servers (does not start anything)
#   pid N          print node N's pid (exit 3 if it is not running)
#   kill N         SIGKILL node N (1-based) and wait until it is gone
#   term N         SIGTERM node N and wait until it has exited (SIGKILL after 60 s)
#   start-node N   start node N again (never reformats) and wait until it is up
#   log N [lines]  tail of node N's server.log (default 50 lines; -f to follow)
#   datadir        print the cluster directory
#   destroy        stop the cluster and delete its directory (the jars stay)
#
# Environment:
#   PAYSVC_DATA_DIR          parent of the cluster directory (default <repo>/.data;
#                            a relative path is taken relative to the repo root).
#                            The cluster lives in $PAYSVC_DATA_DIR/kafka-cluster
#                            (paysvc's embedded broker keeps its log in .../kafka).
#   PAYSVC_KAFKA_PORT_BASE   broker ports BASE..BASE+N-1, controller ports
#                            BASE+100..BASE+100+N-1, all on 127.0.0.1 (default 59092).
#                            0: free ports picked at the first start (and again when
#                            a stopped cluster's ports have been taken meanwhile).
#                            The ports in use are kept in <cluster>/ports: unset or
#                            0, an existing cluster keeps them; another BASE moves a
#                            stopped cluster there (a running one refuses).
#   PAYSVC_KAFKA_NODES       number of nodes, fixed when the cluster is created
#                            (default 3; 1 and 2 work too, with replication factor
#                            min(3,N) and min.insync.replicas max(1,RF-1)).
#   PAYSVC_KAFKA_HEAP        JVM heap flags per node (default "-Xms128m -Xmx512m")
#   PAYSVC_KAFKA_LIB_DIR     where the jars are copied (default <repo>/.data/kafka-lib,
#                            shared by every cluster of this checkout, whatever
#                            PAYSVC_DATA_DIR says); re-resolved with Maven only when
#                            ops/kafka/pom.xml changes
#   PAYSVC_KAFKA_START_TIMEOUT  seconds start and start-node wait (default 120)
#   JAVA_HOME                the JDK (default: java on PATH; Java 17 or later)
#
# Layout of <cluster>: cluster.conf (cluster id, node count), ports (one line per
# node: id, broker port, controller port), node-N/{server.properties,pid,
# stdout.log,data/,logs/server.log}.
#
# Dev/test only: PLAINTEXT listeners without authentication on 127.0.0.1, and the
# group/replication timeouts lowered for fast tests (see broker_properties).
# The nodes run as the invoking user (root included: Kafka does not mind).
set -euo pipefail

readonly PROG=kafka.sh

SCRIPT_PATH=$(readlink -f -- "${BASH_SOURCE[0]}")
SCRIPT_DIR=$(dirname -- "$SCRIPT_PATH")
REPO_ROOT=$(cd -P -- "$SCRIPT_DIR/../.." && pwd -P)
readonly SCRIPT_PATH SCRIPT_DIR REPO_ROOT
readonly POM=$SCRIPT_DIR/pom.xml
readonly LOG4J_CONF=$SCRIPT_DIR/log4j2.properties

START_TIMEOUT=${PAYSVC_KAFKA_START_TIMEOUT:-120} # seconds for every node to come up
readonly STOP_TIMEOUT=60                         # seconds of controlled shutdown before SIGKILL
readonly STARTED_LINE='Kafka Server started'
readonly DEFAULT_PORT_BASE=59092
readonly DEFAULT_NODES=3
readonly DEFAULT_HEAP='-Xms128m -Xmx512m'

note() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

# DATA_ROOT: the directory that holds the cluster directory "kafka-cluster" (not
# "kafka": that is where paysvc's embedded broker keeps its log, in the same
# PAYSVC_DATA_DIR).
data_root() {
	local d=${PAYSVC_DATA_DIR:-.data}
	[[ $d == /* ]] || d=$REPO_ROOT/$d
	realpath -m -- "$d"
}
DATA_ROOT=$(data_root)
CLUSTER=$DATA_ROOT/kafka-cluster
LIB=${PAYSVC_KAFKA_LIB_DIR:-$REPO_ROOT/.data/kafka-lib}
[[ $LIB == /* ]] || LIB=$REPO_ROOT/$LIB
LIB=$(realpath -m -- "$LIB")
readonly DATA_ROOT CLUSTER LIB

is_uint "$START_TIMEOUT" || die "PAYSVC_KAFKA_START_TIMEOUT must be a number of seconds, got '$START_TIMEOUT'"
readonly START_TIMEOUT

JAVA=java
[[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]] && JAVA=$JAVA_HOME/bin/java
readonly JAVA

# ------------------------------------------------------------ cluster state ---

# NODES and the ports (BPORT[i], CPORT[i], i = 1..NODES) of the cluster.
NODES=''
declare -a BPORT=() CPORT=()
CLUSTER_ID=''

# read_conf: NODES and CLUSTER_ID from <cluster>/cluster.conf; fails if absent.
read_conf() {
	local f=$CLUSTER/cluster.conf k v
	[[ -r $f ]] || return 1
	while IFS='=' read -r k v; do
		case $k in
		cluster_id) CLUSTER_ID=$v ;;
		nodes) NODES=$v ;;
		esac
	done <"$f"
	is_uint "$NODES" && ((NODES >= 1)) || die "$f: bad node count '$NODES'"
	[[ -n $CLUSTER_ID ]] || die "$f: no cluster_id"
}

# read_ports: BPORT/CPORT from <cluster>/ports; fails if absent or incomplete.
read_ports() {
	local f=$CLUSTER/ports id b c n=0
	[[ -r $f ]] || return 1
	BPORT=() CPORT=()
	while read -r id b c; do
		[[ -n ${id:-} && $id != \#* ]] || continue
		is_uint "$id" && is_uint "$b" && is_uint "$c" || die "$f: bad line '$id $b $c'"
		BPORT[id]=$b CPORT[id]=$c
		n=$((n + 1))
	done <"$f"
	((n == NODES)) || return 1
}

write_ports() {
	local tmp i
	tmp=$(mktemp "$CLUSTER/.ports.XXXXXX")
	{
		echo "# node broker-port controller-port (127.0.0.1); written by ops/kafka/kafka.sh"
		for ((i = 1; i <= NODES; i++)); do echo "$i ${BPORT[i]} ${CPORT[i]}"; done
	} >"$tmp"
	chmod 0644 "$tmp"
	mv -f -- "$tmp" "$CLUSTER/ports"
}

# free_ports COUNT: print COUNT distinct free loopback ports, all bound at once
# so none is handed out twice.
free_ports() {
	if command -v python3 >/dev/null; then
		python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
		return
	fi
	# No python3: random ports of the range below Linux's ephemeral ports that
	# nothing answers on.
	local -a got=()
	local p tries=0
	while ((${#got[@]} < $1)); do
		((++tries < 1000)) || die "could not find $1 free ports"
		p=$((20000 + RANDOM % 12000))
		[[ " ${got[*]} " == *" $p "* ]] && continue
		port_in_use "$p" && continue
		got+=("$p")
	done
	echo "${got[*]}"
}

# nodes_wanted: PAYSVC_KAFKA_NODES, validated (empty when unset).
nodes_wanted() {
	local n=${PAYSVC_KAFKA_NODES:-}
	[[ -z $n ]] && return 0
	is_uint "$n" && ((n >= 1 && n <= 9)) || die "PAYSVC_KAFKA_NODES must be 1..9, got '$n'"
	printf '%s' "$n"
}

# port_base: PAYSVC_KAFKA_PORT_BASE, validated (empty when unset).
port_base() {
	local b=${PAYSVC_KAFKA_PORT_BASE:-}
	[[ -z $b ]] && return 0
	is_uint "$b" && { ((b == 0)) || ((b >= 1024 && b + 109 <= 65535)); } ||
		die "PAYSVC_KAFKA_PORT_BASE must be 0 or a port number with room for BASE+109, got '$b'"
	printf '%s' "$b"
}

# create_conf: a new cluster: its id and node count.
create_conf() {
	local want tmp
	want=$(nodes_wanted)
	NODES=${want:-$DEFAULT_NODES}
	CLUSTER_ID=$(new_cluster_id)
	mkdir -p -- "$CLUSTER"
	tmp=$(mktemp "$CLUSTER/.cluster.conf.XXXXXX")
	printf 'cluster_id=%s\nnodes=%s\n' "$CLUSTER_ID" "$NODES" >"$tmp"
	chmod 0644 "$tmp"
	mv -f -- "$tmp" "$CLUSTER/cluster.conf"
}

# new_cluster_id: a Kafka Uuid: 16 random bytes, base64url without padding, not
# starting with '-' (as Uuid.randomUuid, so that it is never read as a flag).
new_cluster_id() {
	local id
	while :; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
		[[ ${#id} == 22 && $id != -* ]] && break
	done
	printf '%s' "$id"
}

# choose_ports (start): the ports this start uses, written to <cluster>/ports.
# Call with NODES set and no node running unless the stored ports are kept.
choose_ports() {
	local base have=0 i
	base=$(port_base)
	read_ports && have=1
	if [[ -z $base || $base == 0 ]] && ((have)); then
		# PAYSVC_KAFKA_PORT_BASE=0 on a stopped cluster whose ports someone else
		# took meanwhile: new free ports (the voters are in server.properties only).
		[[ $base == 0 && -z $(running_nodes) ]] && ports_taken || return 0
		note "ports of the stopped cluster in $CLUSTER are taken; picking new ones"
	fi
	local -a nb=() nc=()
	if [[ $base != 0 ]]; then
		base=${base:-$DEFAULT_PORT_BASE}
		for ((i = 1; i <= NODES; i++)); do nb[i]=$((base + i - 1)) nc[i]=$((base + 100 + i - 1)); done
	else
		local -a p
		read -r -a p <<<"$(free_ports $((2 * NODES)))"
		((${#p[@]} == 2 * NODES)) || die "could not pick free ports"
		for ((i = 1; i <= NODES; i++)); do nb[i]=${p[i - 1]} nc[i]=${p[NODES + i - 1]}; done
	fi
	if ((have)); then
		local same=1
		for ((i = 1; i <= NODES; i++)); do
			[[ ${nb[i]} == "${BPORT[i]}" && ${nc[i]} == "${CPORT[i]}" ]] || same=0
		done
		((same)) && return 0
		local r
		r=$(running_nodes)
		[[ -z $r ]] || die "node(s) $r of $CLUSTER run on brokers $(bootstrap), not on PAYSVC_KAFKA_PORT_BASE=$base; unset it (or set 0) to keep those ports, or run '$PROG stop' first to move the cluster"
		note "moving the cluster in $CLUSTER to broker ports ${nb[*]}"
	fi
	BPORT=() CPORT=()
	for ((i = 1; i <= NODES; i++)); do BPORT[i]=${nb[i]} CPORT[i]=${nc[i]}; done
	write_ports
}

# ports_taken: does anything listen on one of the ports in BPORT/CPORT?
ports_taken() {
	local i
	for ((i = 1; i <= NODES; i++)); do
		port_in_use "${BPORT[i]}" || port_in_use "${CPORT[i]}" && return 0
	done
	return 1
}

bootstrap() {
	local i out=''
	for ((i = 1; i <= NODES; i++)); do out+=${out:+,}127.0.0.1:${BPORT[i]}; done
	printf '%s' "$out"
}

# locate: read an existing cluster's state for the commands that only look at it
# or signal it; fails (1) when there is no cluster.
locate() {
	read_conf || return 1
	read_ports || die "$CLUSTER/ports is missing or incomplete; run '$PROG start'"
}

node_dir() { printf '%s/node-%s' "$CLUSTER" "$1"; }

check_node_arg() {
	[[ -n ${1:-} ]] || die "which node? (1..$NODES)"
	is_uint "$1" && (($1 >= 1 && $1 <= NODES)) || die "no node '$1' (the cluster has nodes 1..$NODES)"
}

# ------------------------------------------------------------ process state ---

# pid_alive PID: a live (non-zombie) process? A SIGKILLed node stays a zombie
# where PID 1 does not reap orphans (some containers), and kill -0 still sees it.
pid_alive() {
	local st
	if st=$(cat "/proc/$1/stat" 2>/dev/null); then
		st=${st##*) }
		[[ ${st%% *} != Z ]]
	else
		kill -0 "$1" 2>/dev/null
	fi
}

# is_node_cmd PID N: is PID's command line that of node N (... kafka.Kafka
# <node>/server.properties)? Read with builtins: a /proc scan forks nothing.
is_node_cmd() {
	local -a args
	[[ -r /proc/$1/cmdline ]] || return 1
	mapfile -d "" -t args 2>/dev/null <"/proc/$1/cmdline" || return 1
	local n=${#args[@]}
	((n >= 2)) && [[ ${args[n - 2]} == kafka.Kafka && ${args[n - 1]} == "$(node_dir "$2")/server.properties" ]]
}

# is_node_pid PID N: is PID a live kafka.Kafka process of node N of this cluster?
is_node_pid() {
	pid_alive "$1" || return 1
	[[ -d /proc/self ]] || return 0 # no /proc: trust the pid file
	is_node_cmd "$1" "$2"
}

# node_pid N: print node N's pid if it runs, else fail. The pid file first; then a
# scan of /proc, so a node whose pid file was lost is still found.
node_pid() {
	local f pid d comm
	f=$(node_dir "$1")/pid
	if [[ -r $f ]]; then
		pid=$(<"$f")
		if is_uint "$pid" && is_node_pid "$pid" "$1"; then
			printf '%s\n' "$pid"
			return 0
		fi
	fi
	[[ -d /proc/self ]] || return 1
	for d in /proc/[0-9]*; do
		read -r comm 2>/dev/null <"$d/comm" || continue
		[[ $comm == java ]] || continue
		pid=${d#/proc/}
		is_node_cmd "$pid" "$1" && pid_alive "$pid" || continue
		printf '%s\n' "$pid"
		return 0
	done
	return 1
}

# running_nodes: the ids of the running nodes, space-separated.
running_nodes() {
	local i out=''
	for ((i = 1; i <= NODES; i++)); do
		node_pid "$i" >/dev/null && out+=${out:+ }$i
	done
	printf '%s' "$out"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ------------------------------------------------------------------ locking ---

LOCK_FD=''
# take_lock: serialize the commands that change a cluster (per data dir).
take_lock() {
	[[ -n $LOCK_FD ]] && return 0
	[[ -d $DATA_ROOT && -w $DATA_ROOT ]] || return 0
	command -v flock >/dev/null || return 0
	exec {LOCK_FD}>>"$DATA_ROOT/.kafka.lock"
	flock -w 300 "$LOCK_FD" || die "timed out waiting for $DATA_ROOT/.kafka.lock (another kafka.sh running?)"
}

# --------------------------------------------------------------------- jars ---

kafka_version() { sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM" | head -n1; }

# ensure_lib: copy the runtime jars of pom.xml to $LIB unless $LIB/.stamp holds
# the pom's checksum. A new set is built beside $LIB and renamed into place, so an
# interrupted resolve never leaves a half-copied (or mixed-version) classpath.
ensure_lib() {
	local sum
	sum=$(sha256sum <"$POM" | cut -c1-64)
	[[ -r $LIB/.stamp && $(<"$LIB/.stamp") == "$sum" ]] && return 0
	local parent lockfd
	parent=$(dirname -- "$LIB")
	mkdir -p -- "$parent" || die "cannot create $parent"
	if command -v flock >/dev/null; then
		exec {lockfd}>>"$parent/.$(basename -- "$LIB").lock"
		flock -w 600 "$lockfd" || die "timed out waiting for another resolve of $LIB"
		[[ -r $LIB/.stamp && $(<"$LIB/.stamp") == "$sum" ]] && { exec {lockfd}>&-; return 0; }
	fi
	if ! command -v mvn >/dev/null; then
		if compgen -G "$LIB/kafka_2.13-*.jar" >/dev/null; then
			note "warning: ops/kafka/pom.xml changed but mvn is not installed; using the jars in $LIB as they are"
			return 0
		fi
		die "mvn not found: install Maven (Debian: apt-get install maven) to fetch Apache Kafka's jars"
	fi
	note "resolving Apache Kafka $(kafka_version) with Maven into $LIB (the first time downloads ~45 MB into ~/.m2)..."
	local tmp log
	rm -rf -- "$LIB".new.* 2>/dev/null || true
	tmp=$(mktemp -d "$LIB.new.XXXXXX")
	log=$tmp.log
	if ! mvn -B -q -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory="$tmp" </dev/null >"$log" 2>&1; then
		tail -n 40 -- "$log" >&2
		rm -rf -- "$tmp"
		die "Maven could not resolve ops/kafka/pom.xml (log: $log)"
	fi
	compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null || die "no kafka_2.13 jar after resolving (log: $log)"
	rm -f -- "$log"
	printf '%s\n' "$sum" >"$tmp/.stamp"
	chmod 0755 "$tmp"
	rm -rf -- "$LIB.old"
	[[ -e $LIB ]] && mv -- "$LIB" "$LIB.old"
	mv -- "$tmp" "$LIB"
	rm -rf -- "$LIB.old"
	[[ -n ${lockfd:-} ]] && exec {lockfd}>&-
	return 0
}

check_java() {
	command -v "$JAVA" >/dev/null ||
		die "java not found: install a JDK 17 or later (Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
	local v
	v=$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
	[[ -z $v || $v -ge 17 ]] || die "$JAVA is Java $v; Apache Kafka 4 needs Java 17 or later (set JAVA_HOME)"
}

# ------------------------------------------------------------ configuration ---

# broker_properties N: node N's server.properties (rewritten at every start).
broker_properties() {
	local i=$1 d rf minisr voters='' j
	d=$(node_dir "$i")
	rf=$((NODES < 3 ? NODES : 3))
	minisr=$((rf > 1 ? rf - 1 : 1))
	for ((j = 1; j <= NODES; j++)); do voters+=${voters:+,}$j@127.0.0.1:${CPORT[j]}; done
	cat <<EOF
# Written by ops/kafka/kafka.sh at every start: do not edit (edit the script).
# Node $i of $NODES of the private paysvc cluster in $CLUSTER.
process.roles=broker,controller
node.id=$i
# A static quorum: every node formatted with one cluster id and no quorum flag.
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:${BPORT[i]},CONTROLLER://127.0.0.1:${CPORT[i]}
advertised.listeners=PLAINTEXT://127.0.0.1:${BPORT[i]},CONTROLLER://127.0.0.1:${CPORT[i]}
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$d/data

# Durability as in production (docker-compose.yml), scaled to the node count:
# replication factor min(3,N), min.insync.replicas RF-1 (at least 1).
default.replication.factor=$rf
min.insync.replicas=$minisr
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$minisr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$minisr
unclean.leader.election.enable=false
auto.create.topics.enable=false
num.partitions=4

# Fast tests. Few partitions for the internal topics, so a coordinator is loaded
# (and moved after a node restart) quickly.
offsets.topic.num.partitions=10
transaction.state.log.num.partitions=10
# The first group join is not held back 3 s waiting for more members.
group.initial.rebalance.delay.ms=0
# Tests use 1-2 s session timeouts so that a killed member is noticed quickly; the
# broker refuses anything below this bound. A production broker keeps its 6 s
# default.
group.min.session.timeout.ms=1000
# A KILLED node is fenced (leadership of its partitions moved, itself dropped from
# every ISR) when its controller session expires: 6 s instead of 9 s, with
# heartbeats every second instead of every two (measured: acks=all produce to a
# partition the killed node followed waited 10.4 s with the defaults). The same
# session also holds back a node restarted soon after a clean stop
# (DUPLICATE_BROKER_REGISTRATION until it expires), so it bounds how long
# "term N; start-node N" takes too.
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=6000
# A follower that is alive but stops fetching (a stalled JVM, a slow disk) keeps
# its heartbeats and is not fenced: it leaves the ISR only after this long, and
# until then every acks=all produce to a partition it follows waits for it (or
# times out). 10 s instead of 30 s keeps such stalls within the request timeouts
# the tests use; lower would flap the ISR on a loaded 2-core CI box.
replica.lag.time.max.ms=10000
# Its 128 MiB default is allocated on the heap at the first compaction.
log.cleaner.dedupe.buffer.size=16777216
EOF
}

write_properties() {
	local i=$1 d tmp
	d=$(node_dir "$i")
	mkdir -p -- "$d/data" "$d/logs"
	tmp=$(mktemp "$d/.server.properties.XXXXXX")
	broker_properties "$i" >"$tmp"
	chmod 0644 "$tmp"
	mv -f -- "$tmp" "$d/server.properties"
}

is_formatted() { [[ -f $(node_dir "$1")/data/meta.properties ]]; }

# java_run CLASS ARGS...: run a Kafka main class in the foreground, logging to
# $JAVA_RUN_LOGS/tool.log.
java_run() {
	"$JAVA" -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
		-Dlog4j2.configurationFile="$LOG4J_CONF" -Dkafka.logs.dir="$JAVA_RUN_LOGS" -Dpaysvc.log.name=tool \
		-cp "$LIB/*" "$@"
}

# format_nodes: format the storage of a new cluster, every node with the same
# cluster id, in parallel. Once every node is formatted, <cluster>/formatted is
# written and nothing is ever formatted again: a node of an existing cluster whose
# data is gone would come back as an empty voter, which KRaft cannot tell from a
# healthy one.
format_nodes() {
	local i
	if [[ -f $CLUSTER/formatted ]]; then
		for ((i = 1; i <= NODES; i++)); do
			is_formatted "$i" ||
				die "node $i's storage ($(node_dir "$i")/data) is gone; the cluster cannot take it back: run '$PROG destroy' and start again"
		done
		return 0
	fi
	local -a pids=()
	for ((i = 1; i <= NODES; i++)); do
		is_formatted "$i" && continue
		JAVA_RUN_LOGS=$(node_dir "$i")/logs java_run kafka.tools.StorageTool format --ignore-formatted \
			-t "$CLUSTER_ID" -c "$(node_dir "$i")/server.properties" \
			</dev/null >"$(node_dir "$i")/logs/format.log" 2>&1 &
		pids[i]=$!
	done
	for i in "${!pids[@]}"; do
		if ! wait "${pids[i]}"; then
			cat -- "$(node_dir "$i")/logs/format.log" >&2
			die "formatting node $i failed"
		fi
	done
	for ((i = 1; i <= NODES; i++)); do
		is_formatted "$i" || die "node $i is not formatted after kafka.tools.StorageTool format; see $(node_dir "$i")/logs/format.log"
	done
	: >"$CLUSTER/formatted"
	note "formatted a $NODES-node cluster (id $CLUSTER_ID) in $CLUSTER"
}

# ------------------------------------------------------------------- nodes ---

# launch N: start node N detached: its own session, stdin from /dev/null,
# stdout/stderr to <node>/stdout.log and every other inherited fd closed, so the
# JVM never holds our lock file or a pipe a CI runner waits on.
launch() {
	local i=$1 d heap
	d=$(node_dir "$i")
	heap=${PAYSVC_KAFKA_HEAP:-$DEFAULT_HEAP}
	# A fresh server.log per run (the previous one is kept as server.log.prev):
	# the wait below looks for this run's "started" line.
	if [[ -f $d/logs/server.log ]]; then
		mv -f -- "$d/logs/server.log" "$d/logs/server.log.prev"
	fi
	rm -f -- "$d/logs/server.log.1" "$d/pid"
	if [[ -f $d/stdout.log ]] && (($(stat -c %s -- "$d/stdout.log") > 10 * 1024 * 1024)); then
		mv -f -- "$d/stdout.log" "$d/stdout.log.1"
	fi
	printf '=== %s: starting node %s (kafka.sh)\n' "$(date -u +%FT%TZ)" "$i" >>"$d/stdout.log"
	local -a argv
	# shellcheck disable=SC2206 # the heap flags are words on purpose
	argv=("$JAVA" $heap -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError
		-XX:-UsePerfData -Djava.awt.headless=true
		-Dlog4j2.configurationFile="$LOG4J_CONF" -Dkafka.logs.dir="$d/logs"
		-cp "$LIB/*" kafka.Kafka "$d/server.properties")
	(
		cd -- "$d"
		local fd n
		for fd in /proc/$BASHPID/fd/*; do
			n=${fd##*/}
			[[ $n =~ ^[0-9]+$ ]] && ((n > 2)) && eval "exec $n>&-" 2>/dev/null || true
		done
		# bash -c writes its own pid, which exec hands on to the JVM, whether or
		# not setsid had to fork.
		exec setsid bash -c 'echo $$ >"$0.tmp" && mv -f "$0.tmp" "$0" && exec "$@"' "$d/pid" "${argv[@]}" \
			</dev/null >>"$d/stdout.log" 2>&1
	) &
	local k
	for ((k = 0; k < 100; k++)); do
		[[ -s $d/pid ]] && return 0
		sleep 0.05
	done
	die "node $i did not start (no pid file); see $d/stdout.log"
}

started_logged() {
	local d
	d=$(node_dir "$1")/logs
	grep -qsF -- "$STARTED_LINE" "$d/server.log" "$d/server.log.1"
}

show_failure() {
	local i=$1 d
	d=$(node_dir "$i")
	if grep -qsE '^\[[^]]*\] (ERROR|FATAL) ' "$d/logs/server.log"; then
		note "first errors in $d/logs/server.log:"
		grep -sE '^\[[^]]*\] (ERROR|FATAL) ' "$d/logs/server.log" | head -n 5 >&2 || true
	fi
	note "tail of $d/logs/server.log:"
	tail -n 30 -- "$d/logs/server.log" >&2 2>/dev/null || true
	if [[ -s $d/stdout.log ]]; then
		note "tail of $d/stdout.log:"
		tail -n 15 -- "$d/stdout.log" >&2 || true
	fi
}

# wait_up N...: wait until each node has logged STARTED_LINE and accepts TCP on its
# broker port; on a node's exit or after START_TIMEOUT, show its log and fail.
wait_up() {
	local deadline=$((SECONDS + START_TIMEOUT)) i
	local -a pending=("$@")
	while ((${#pending[@]})); do
		local -a still=()
		for i in "${pending[@]}"; do
			if ! node_pid "$i" >/dev/null; then
				show_failure "$i"
				die "node $i exited while starting (logs in $(node_dir "$i"))"
			fi
			if started_logged "$i" && port_in_use "${BPORT[i]}"; then
				continue
			fi
			still+=("$i")
		done
		pending=("${still[@]}")
		((${#pending[@]})) || break
		if ((SECONDS >= deadline)); then
			for i in "${pending[@]}"; do show_failure "$i"; done
			die "node(s) ${pending[*]} not up after ${START_TIMEOUT} s (logs in $CLUSTER/node-*/logs)"
		fi
		sleep 0.2
	done
}

# start_nodes N...: start those of the nodes that are not running, then wait for
# all of them.
start_nodes() {
	local i p
	local -a launched=()
	for i in "$@"; do
		node_pid "$i" >/dev/null && continue
		for p in "${BPORT[i]}" "${CPORT[i]}"; do
			if port_in_use "$p"; then
				die "something else listens on 127.0.0.1:$p (node $i's port; another checkout's cluster?); stop it, or move this cluster: PAYSVC_KAFKA_PORT_BASE=<base> (or 0: free ports) $PROG start"
			fi
		done
	done
	for i in "$@"; do
		node_pid "$i" >/dev/null && continue
		write_properties "$i"
		launch "$i"
		launched+=("$i")
	done
	wait_up "$@"
	((${#launched[@]} == 0)) || note "started node(s) ${launched[*]} of $CLUSTER ($(bootstrap))"
}

# signal_and_wait SIG TIMEOUT N...: signal the running nodes among N..., wait for
# them to exit; SIGKILL what is left after TIMEOUT seconds.
#
# A SIGTERMed broker exits only once the active controller has granted its
# controlled shutdown, and waits up to 5 minutes for that. When the nodes stop
# together, the first ones to be granted take their controllers down with them;
# the rest, left without a controller quorum (fewer than N/2+1 nodes running),
# can wait for the full 5 minutes (seen on a loaded 2-core machine). So once the
# quorum is gone, what is left gets QUORUM_GRACE seconds (enough to finish a
# granted shutdown, whose last step waits 5 s for the other controllers) and is
# then SIGKILLed: it recovers its logs at the next start, nothing acknowledged is
# lost.
readonly QUORUM_GRACE=10
signal_and_wait() {
	local sig=$1 t=$2 i pid
	shift 2
	local -a pids=() ids=()
	local others=0 majority=$((NODES / 2 + 1))
	for ((i = 1; i <= NODES; i++)); do
		[[ " $* " == *" $i "* ]] && continue
		node_pid "$i" >/dev/null && others=$((others + 1))
	done
	for i in "$@"; do
		pid=$(node_pid "$i") || continue
		pids+=("$pid") ids+=("$i")
		kill "-$sig" "$pid" 2>/dev/null || true
	done
	((${#pids[@]})) || return 0
	local deadline=$((SECONDS + t)) lost_at='' k why=''
	local -a left_pids left_ids
	while :; do
		left_pids=() left_ids=()
		# The node's identity, not only its pid: a node that exited frees its pid,
		# which the kernel may give to any other process meanwhile (it gave one to
		# a PostgreSQL backend, which the SIGKILL below then killed).
		for k in "${!pids[@]}"; do
			is_node_pid "${pids[k]}" "${ids[k]}" && left_pids+=("${pids[k]}") left_ids+=("${ids[k]}")
		done
		((${#left_pids[@]})) || break
		if ((others + ${#left_pids[@]} < majority)); then
			lost_at=${lost_at:-$SECONDS}
			if ((SECONDS - lost_at >= QUORUM_GRACE)); then
				why="still running ${QUORUM_GRACE} s after the controller quorum went away (a controlled shutdown needs it)"
				break
			fi
		fi
		if ((SECONDS >= deadline)); then
			why="still running ${t} s after SIG$sig"
			break
		fi
		sleep 0.2
	done
	if [[ -n $why ]]; then
		note "node(s) ${left_ids[*]} $why; sending SIGKILL"
		for k in "${!left_pids[@]}"; do
			is_node_pid "${left_pids[k]}" "${left_ids[k]}" && kill -KILL "${left_pids[k]}" 2>/dev/null || true
		done
		local deadline_kill=$((SECONDS + 10))
		for k in "${!left_pids[@]}"; do
			while is_node_pid "${left_pids[k]}" "${left_ids[k]}"; do
				((SECONDS < deadline_kill)) || die "node(s) ${left_ids[*]} survived SIGKILL"
				sleep 0.2
			done
		done
	fi
	for i in "${ids[@]}"; do rm -f -- "$(node_dir "$i")/pid"; done
}

# ---------------------------------------------------------------- commands ---

cmd_start() {
	umask 022
	check_java
	mkdir -p -- "$DATA_ROOT"
	take_lock
	ensure_lib
	if read_conf; then
		local want
		want=$(nodes_wanted)
		[[ -z $want || $want == "$NODES" ]] ||
			die "the cluster in $CLUSTER has $NODES node(s), not $want (PAYSVC_KAFKA_NODES); run '$PROG destroy' first to change it"
	else
		[[ ! -e $CLUSTER/formatted ]] || die "$CLUSTER/cluster.conf is missing; run '$PROG destroy' and start again"
		create_conf
	fi
	choose_ports
	local i
	for ((i = 1; i <= NODES; i++)); do node_pid "$i" >/dev/null || write_properties "$i"; done
	format_nodes
	local -a all=()
	for ((i = 1; i <= NODES; i++)); do all+=("$i"); done
	start_nodes "${all[@]}"
	bootstrap
	echo
}

cmd_start_node() {
	locate || die "no cluster in $CLUSTER; run '$PROG start'"
	check_node_arg "${1:-}"
	umask 022
	check_java
	take_lock
	ensure_lib
	format_nodes # only checks: the cluster is formatted, this node's data is there
	start_nodes "$1"
}

cmd_stop() {
	locate || return 0
	take_lock
	local -a all=()
	local i
	for ((i = 1; i <= NODES; i++)); do all+=("$i"); done
	signal_and_wait TERM "$STOP_TIMEOUT" "${all[@]}"
}

cmd_term() {
	locate || die "no cluster in $CLUSTER"
	check_node_arg "${1:-}"
	take_lock
	signal_and_wait TERM "$STOP_TIMEOUT" "$1"
}

cmd_kill() {
	locate || die "no cluster in $CLUSTER"
	check_node_arg "${1:-}"
	take_lock
	signal_and_wait KILL 10 "$1"
}

cmd_pid() {
	locate || die "no cluster in $CLUSTER"
	check_node_arg "${1:-}"
	node_pid "$1" || exit 3
}

cmd_status() {
	if ! locate; then
		printf 'no cluster (data %s)\n' "$CLUSTER"
		return 3
	fi
	local i pid up=0
	for ((i = 1; i <= NODES; i++)); do
		if pid=$(node_pid "$i"); then
			printf 'node %s: running, pid %s, broker 127.0.0.1:%s, controller 127.0.0.1:%s\n' \
				"$i" "$pid" "${BPORT[i]}" "${CPORT[i]}"
			up=$((up + 1))
		else
			printf 'node %s: not running (broker 127.0.0.1:%s)\n' "$i" "${BPORT[i]}"
		fi
	done
	((up == NODES)) && return 0
	((up == 0)) && return 3
	return 1
}

# brokers: the cluster's ports if it exists; else what a start would use.
cmd_brokers() {
	if read_conf && read_ports; then
		local base
		base=$(port_base)
		# a stopped cluster moves to an explicitly set base at its next start
		if [[ -n $base && $base != 0 && $base != "${BPORT[1]}" && -z $(running_nodes) ]]; then
			local i
			for ((i = 1; i <= NODES; i++)); do BPORT[i]=$((base + i - 1)); done
		fi
	else
		local want base i
		want=$(nodes_wanted)
		NODES=${want:-$DEFAULT_NODES}
		base=$(port_base)
		base=${base:-$DEFAULT_PORT_BASE}
		((base != 0)) || die "PAYSVC_KAFKA_PORT_BASE=0: the ports are picked at the first start ('$PROG start' prints them)"
		for ((i = 1; i <= NODES; i++)); do BPORT[i]=$((base + i - 1)); done
	fi
	bootstrap
	echo
}

cmd_log() {
	locate || die "no cluster in $CLUSTER"
	check_node_arg "${1:-}"
	local f
	f=$(node_dir "$1")/logs/server.log
	[[ -f $f ]] || die "no log at $f"
	if [[ ${2:-} == -f ]]; then exec tail -n 50 -F -- "$f"; fi
	tail -n "${2:-50}" -- "$f"
}

cmd_destroy() {
	cmd_stop
	[[ -e $CLUSTER ]] || return 0
	rm -rf -- "$CLUSTER"
	note "removed $CLUSTER"
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
	brokers) cmd_brokers ;;
	pid) cmd_pid "$@" ;;
	kill) cmd_kill "$@" ;;
	term) cmd_term "$@" ;;
	start-node) cmd_start_node "$@" ;;
	log) cmd_log "$@" ;;
	datadir) printf '%s\n' "$CLUSTER" ;;
	destroy) cmd_destroy ;;
	-h | --help | help) usage ;;
	'') usage >&2; exit 2 ;;
	*) note "unknown command '$cmd'"; usage >&2; exit 2 ;;
	esac
}

main "$@"

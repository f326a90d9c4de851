#!/usr/bin/env bash
# ops/cluster/cluster.sh -- the production shape as processes on one machine:
# Apache Kafka, the private PostgreSQL (ops/pg/pg.sh), and two processes of each
# role (`paysvc serve --roles X`). Kafka is a 3-node Apache Kafka cluster of its
# own (ops/kafka/kafka.sh: KRaft, replication factor 3, min.insync.replicas 2)
# when java and mvn are installed, and one `paysvc broker` (the embedded kfake:
# development only) when they are not. `make cluster` runs it; ^C (or SIGTERM)
# stops every paysvc process with SIGTERM, as an orchestrator would, waits for
# them, then stops the Kafka cluster (its data is kept for the next run).
#
# Usage: ops/cluster/cluster.sh            (after make build and make pg)
#
# Environment:
#   PAYSVC_BIN             the binary (default bin/paysvc)
#   CLUSTER_DIR            logs and the broker's data (default .data/cluster; the
#                          Apache Kafka cluster in its kafka-cluster/, paysvc
#                          broker's log in its kafka/)
#   CLUSTER_PORT_BASE      ports used (default 19000): process i (0..9) public HTTP
#                          BASE+100+i, admin BASE+200+i; Apache Kafka's brokers
#                          BASE+300..302 (controllers BASE+400..402), or paysvc
#                          broker on BASE+92
#   CLUSTER_KAFKA          apache (ops/kafka/kafka.sh) or kfake (paysvc broker);
#                          default apache when java and mvn are on PATH
#   PAYSVC_DATABASE_URL    the database (default: on the private cluster, created
#                          when missing, so make run's data is not mixed in:
#                          paysvc_cluster_kafka with Apache Kafka, paysvc_cluster
#                          with paysvc broker; an engine refuses a command log
#                          that is behind its database, so each Kafka keeps its own)
# Other PAYSVC_* variables are passed to every process.
#
# Processes and addresses are printed once all answer on their admin /readyz.
# The cluster test (cmd/paysvc/service/cluster_test.go) starts the same shape.
set -euo pipefail

cd "$(dirname "$0")/../.."
BIN=${PAYSVC_BIN:-bin/paysvc}
DIR=${CLUSTER_DIR:-.data/cluster}
BASE=${CLUSTER_PORT_BASE:-19000}
PG=ops/pg/pg.sh
KAFKA=ops/kafka/kafka.sh

if [[ -z ${CLUSTER_KAFKA:-} ]]; then
	if command -v java >/dev/null && command -v mvn >/dev/null; then CLUSTER_KAFKA=apache; else CLUSTER_KAFKA=kfake; fi
fi
case $CLUSTER_KAFKA in
apache) DB=paysvc_cluster_kafka ;;
kfake) DB=paysvc_cluster ;;
*) echo "cluster.sh: CLUSTER_KAFKA must be apache or kfake, got '$CLUSTER_KAFKA'" >&2; exit 1 ;;
esac

[[ -x $BIN ]] || { echo "cluster.sh: $BIN missing: run make build" >&2; exit 1; }
mkdir -p "$DIR"

if [[ -z ${PAYSVC_DATABASE_URL:-} ]]; then
	if [[ -z $($PG psql -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'") ]]; then
		$PG psql -qc "CREATE DATABASE $DB" >/dev/null
	fi
	url=$($PG url)
	PAYSVC_DATABASE_URL=${url/\/paysvc\?/\/$DB?}
fi
export PAYSVC_DATABASE_URL
export PAYSVC_SMTP_SINK_ADDR=${PAYSVC_SMTP_SINK_ADDR:-127.0.0.1:0}
export PAYSVC_LOG_FORMAT=${PAYSVC_LOG_FORMAT:-json}

declare -a pids=() names=() publics=() admins=()
stop() {
	trap - INT TERM
	echo "cluster.sh: stopping ${#pids[@]} processes (SIGTERM)" >&2
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait
	exit 0
}
trap stop INT TERM

# The Kafka cluster of kafka.sh runs detached: stop it whenever this script ends,
# after the paysvc processes (stop() waits for them first).
kafka_env=(PAYSVC_DATA_DIR="$DIR" PAYSVC_KAFKA_PORT_BASE=$((BASE + 300)) PAYSVC_KAFKA_NODES=3)
if [[ $CLUSTER_KAFKA == apache ]]; then
	trap 'echo "cluster.sh: stopping the Kafka cluster" >&2; env "${kafka_env[@]}" "$KAFKA" stop || true' EXIT
	echo "cluster.sh: starting the 3-node Apache Kafka cluster in $DIR/kafka-cluster" >&2
	PAYSVC_KAFKA_BROKERS=$(env "${kafka_env[@]}" "$KAFKA" start)
	export PAYSVC_KAFKA_BROKERS
fi

# Migrations once, before ten processes race for the lock.
"$BIN" migrate >"$DIR/migrate.log" 2>&1

if [[ $CLUSTER_KAFKA == kfake ]]; then
	export PAYSVC_KAFKA_BROKERS=127.0.0.1:$((BASE + 92))
	PAYSVC_DATA_DIR=$DIR "$BIN" broker --port $((BASE + 92)) >>"$DIR/broker.log" 2>&1 &
	pids+=($!) names+=(broker) publics+=("$PAYSVC_KAFKA_BROKERS") admins+=("")

	# A paysvc process whose broker refuses connections exits at start (it creates
	# its topics first): start them once the broker listens.
	until (exec 3<>/dev/tcp/127.0.0.1/$((BASE + 92))) 2>/dev/null; do
		kill -0 "${pids[0]}" 2>/dev/null || { echo "cluster.sh: the broker exited; see $DIR/broker.log" >&2; stop; }
		sleep 0.1
	done
fi

i=0
for role in api engine relay rails dispatcher; do
	for n in 1 2; do
		name=$role-$n
		PAYSVC_INSTANCE_ID=$name PAYSVC_HTTP_ADDR=127.0.0.1:$((BASE + 100 + i)) PAYSVC_ADMIN_ADDR=127.0.0.1:$((BASE + 200 + i)) \
			PAYSVC_DATA_DIR=$DIR/$name "$BIN" serve --roles "$role" >>"$DIR/$name.log" 2>&1 &
		pids+=($!) names+=("$name") publics+=("127.0.0.1:$((BASE + 100 + i))") admins+=("127.0.0.1:$((BASE + 200 + i))")
		i=$((i + 1))
	done
done

# Ready when every process's admin listener says it can do its roles' work (/readyz:
# database, broker, and for an engine its partitions claimed).
deadline=$((SECONDS + 120))
for k in "${!names[@]}"; do
	[[ -n ${admins[$k]} ]] || continue
	until curl -fs -o /dev/null "http://${admins[$k]}/readyz"; do
		kill -0 "${pids[$k]}" 2>/dev/null || { echo "cluster.sh: ${names[$k]} exited; see $DIR/${names[$k]}.log" >&2; stop; }
		((SECONDS < deadline)) || { echo "cluster.sh: ${names[$k]} not ready after 120 s" >&2; stop; }
		sleep 0.2
	done
done

printf '%-13s %-7s %-22s %s\n' process pid public admin
if [[ $CLUSTER_KAFKA == apache ]]; then
	IFS=, read -r -a brokers <<<"$PAYSVC_KAFKA_BROKERS"
	for n in "${!brokers[@]}"; do
		printf '%-13s %-7s %-22s %s\n' "kafka-$((n + 1))" "$(env "${kafka_env[@]}" "$KAFKA" pid $((n + 1)) || echo -)" \
			"${brokers[$n]}" "(Apache Kafka)"
	done
fi
for k in "${!names[@]}"; do
	if [[ ${names[$k]} == broker ]]; then
		printf '%-13s %-7s %-22s %s\n' broker "${pids[$k]}" "${publics[$k]}" "(kafka)"
	else
		printf '%-13s %-7s %-22s %s\n' "${names[$k]}" "${pids[$k]}" "${publics[$k]}" "${admins[$k]}"
	fi
done
echo "database $PAYSVC_DATABASE_URL; logs in $DIR; ^C stops the cluster"
if [[ $CLUSTER_KAFKA == apache ]]; then
	echo "Kafka nodes: PAYSVC_DATA_DIR=$DIR PAYSVC_KAFKA_PORT_BASE=$((BASE + 300)) $KAFKA status|log N|kill N|term N|start-node N"
fi
wait

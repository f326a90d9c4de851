#!/usr/bin/env bash
# ops/cluster/cluster.sh -- the production shape as processes on one machine:
# one broker (`paysvc broker`, the embedded kfake: development only), the private
# PostgreSQL (ops/pg/pg.sh), and two processes of each role
# (`paysvc serve --roles X`). `make cluster` runs it; ^C (or SIGTERM) stops every
# process with SIGTERM, as an orchestrator would, and waits for them.
#
# Usage: ops/cluster/cluster.sh            (after make build and make pg)
#
# Environment:
#   PAYSVC_BIN             the binary (default bin/paysvc)
#   CLUSTER_DIR            logs and the broker's data (default .data/cluster)
#   CLUSTER_PORT_BASE      ports used (default 19000): broker BASE+92, process i
#                          (0..9) public HTTP BASE+100+i, admin BASE+200+i
#   PAYSVC_DATABASE_URL    the database (default: database paysvc_cluster on the
#                          private cluster, created when missing, so make run's
#                          data is not mixed in)
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

[[ -x $BIN ]] || { echo "cluster.sh: $BIN missing: run make build" >&2; exit 1; }
mkdir -p "$DIR"

if [[ -z ${PAYSVC_DATABASE_URL:-} ]]; then
	if [[ -z $($PG psql -tAc "SELECT 1 FROM pg_database WHERE datname = 'paysvc_cluster'") ]]; then
		$PG psql -qc 'CREATE DATABASE paysvc_cluster' >/dev/null
	fi
	url=$($PG url)
	PAYSVC_DATABASE_URL=${url/\/paysvc\?/\/paysvc_cluster?}
fi
export PAYSVC_DATABASE_URL
export PAYSVC_KAFKA_BROKERS=127.0.0.1:$((BASE + 92))
export PAYSVC_SMTP_SINK_ADDR=${PAYSVC_SMTP_SINK_ADDR:-127.0.0.1:0}
export PAYSVC_LOG_FORMAT=${PAYSVC_LOG_FORMAT:-json}

declare -a pids=() names=() admins=()
stop() {
	trap - INT TERM
	echo "cluster.sh: stopping ${#pids[@]} processes (SIGTERM)" >&2
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait
	exit 0
}
trap stop INT TERM

# Migrations once, before ten processes race for the lock.
"$BIN" migrate >"$DIR/migrate.log" 2>&1

PAYSVC_DATA_DIR=$DIR "$BIN" broker --port $((BASE + 92)) >>"$DIR/broker.log" 2>&1 &
pids+=($!) names+=(broker) admins+=("")

# A paysvc process whose broker refuses connections exits at start (it creates its
# topics first): start them once the broker listens.
until (exec 3<>/dev/tcp/127.0.0.1/$((BASE + 92))) 2>/dev/null; do
	kill -0 "${pids[0]}" 2>/dev/null || { echo "cluster.sh: the broker exited; see $DIR/broker.log" >&2; stop; }
	sleep 0.1
done

i=0
for role in api engine relay rails dispatcher; do
	for n in 1 2; do
		name=$role-$n
		PAYSVC_INSTANCE_ID=$name PAYSVC_HTTP_ADDR=127.0.0.1:$((BASE + 100 + i)) PAYSVC_ADMIN_ADDR=127.0.0.1:$((BASE + 200 + i)) \
			PAYSVC_DATA_DIR=$DIR/$name "$BIN" serve --roles "$role" >>"$DIR/$name.log" 2>&1 &
		pids+=($!) names+=("$name") admins+=("127.0.0.1:$((BASE + 200 + i))")
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
for k in "${!names[@]}"; do
	if [[ ${names[$k]} == broker ]]; then
		printf '%-13s %-7s %-22s %s\n' broker "${pids[$k]}" "$PAYSVC_KAFKA_BROKERS" "(kafka)"
	else
		printf '%-13s %-7s %-22s %s\n' "${names[$k]}" "${pids[$k]}" "127.0.0.1:$((BASE + 100 + k - 1))" "${admins[$k]}"
	fi
done
echo "database $PAYSVC_DATABASE_URL; logs in $DIR; ^C stops the cluster"
wait

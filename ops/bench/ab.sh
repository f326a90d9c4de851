#!/usr/bin/env bash
# ops/bench/ab.sh -- interleaved A/B runs of `paysvc-bench` for two or more paysvc binaries.
#
# Usage: ops/bench/ab.sh ROUNDS SCENARIOS BINARY[,VAR=VALUE...]...
#   BINARY is a paysvc (service) binary; one load generator drives them all:
#   BENCH (default bin/paysvc-bench, `go build -o bin/paysvc-bench ./cmd/paysvc-bench`).
#   e.g. git stash; go build -o /tmp/paysvc-a ./cmd/paysvc; git stash pop
#        go build -o /tmp/paysvc-b ./cmd/paysvc
#        ops/bench/ab.sh 3 transfer-spread,transfer-hot /tmp/paysvc-a /tmp/paysvc-b
#        ops/bench/ab.sh 2 stk-collect /tmp/paysvc-b /tmp/paysvc-b,GOGC=300   # one binary, two environments
#
# Throughput on a shared 2-core VM moves 20-40% between identical runs, so a
# change is judged by binaries run alternately, round after round, never by one
# run against a number from an earlier hour (docs/benchmarks.md).
# Each line: binary (and its variables), transfers/s per scenario, STK collections
# completed/s, payout transactions/s, CPU per transfer or collection (paysvc/pg),
# the commit mean, the wait after a commit's end (pipeline), the other load on the
# machine, and how many conservation checks failed. DUR (default 8s) sets each
# scenario's measured time. PAYSVC_DATABASE_URL defaults to the private cluster of
# `make pg`.
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n '2,20p' "$0"; exit 2; }
bench=${BENCH:-bin/paysvc-bench}
[[ -x $bench ]] || { echo "ab.sh: $bench is not there: go build -o bin/paysvc-bench ./cmd/paysvc-bench (or set BENCH)" >&2; exit 2; }
rounds=$1 scenarios=$2
shift 2
url=${PAYSVC_DATABASE_URL:-$(bash "$(dirname -- "$0")/../pg/pg.sh" url)}
for ((i = 1; i <= rounds; i++)); do
	for arg in "$@"; do
		IFS=, read -r -a parts <<<"$arg"
		bin=${parts[0]}
		out=$(env "${parts[@]:1}" PAYSVC_DATABASE_URL="$url" "$bench" --paysvc "$bin" --scenario "$scenarios" --baseline=false \
			--half-rate-duration 0 --duration "${DUR:-8s}" --warmup 2s 2>&1) || true
		rate=$(awk '/^  transfers\/s/ {printf "%s ", $2}' <<<"$out")
		stk=$(awk '/^  completed\/s/ {printf "%s ", $2}' <<<"$out")
		payout=$(sed -n 's/.* \([0-9]*\) transactions\/s$/\1/p' <<<"$out" | tr '\n' ' ')
		cpu=$(awk '/^  cpu\/transfer|^  cpu\/collection/ {printf "%s/%s ", $3, $6}' <<<"$out")
		commit=$(sed -n 's/.*commit mean \([0-9.]*\) ms.*/\1/p' <<<"$out" | head -n 3 | tr '\n' ' ')
		wait=$(sed -n 's/.*waited \([0-9.]*\) ms after its end.*/\1/p' <<<"$out" | tr '\n' ' ')
		other=$(sed -n 's/.*other \([0-9.]*\);.*/\1/p' <<<"$out" | tr '\n' ' ')
		printf 'round %d %-28s transfers/s %s| stk/s %s| payout/s %s| cpu us %s| commit ms %s| wait ms %s| other %s| %s failed checks\n' \
			"$i" "$(basename -- "$arg")" "$rate" "$stk" "$payout" "$cpu" "$commit" "$wait" "$other" "$(grep -c 'FAIL:' <<<"$out" || true)"
	done
done

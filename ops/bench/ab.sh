#!/usr/bin/env bash
# ops/bench/ab.sh -- interleaved A/B runs of `paysvc bench` for two or more binaries.
#
# Usage: ops/bench/ab.sh ROUNDS SCENARIOS BINARY...
#   e.g. git stash; go build -o /tmp/paysvc-a ./cmd/paysvc; git stash pop
#        go build -o /tmp/paysvc-b ./cmd/paysvc
#        ops/bench/ab.sh 3 transfer-spread,transfer-hot /tmp/paysvc-a /tmp/paysvc-b
#
# Throughput on a shared 2-core VM moves 20-40% between identical runs, so a
# change is judged by binaries run alternately, round after round, never by one
# run against a number from an earlier hour (docs/benchmarks.md, "Session 4").
# Each line: binary, transfers/s per scenario, CPU per transfer (paysvc, postgres)
# per scenario, the other load on the machine, and how many checks failed.
# DUR (default 8s) sets each scenario's measured time. PAYSVC_DATABASE_URL
# defaults to the private cluster of `make pg`.
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n '2,15p' "$0"; exit 2; }
rounds=$1 scenarios=$2
shift 2
url=${PAYSVC_DATABASE_URL:-$(bash "$(dirname -- "$0")/../pg/pg.sh" url)}
for ((i = 1; i <= rounds; i++)); do
	for bin in "$@"; do
		out=$(PAYSVC_DATABASE_URL=$url "$bin" bench --scenario "$scenarios" --baseline=false \
			--half-rate-duration 0 --duration "${DUR:-8s}" --warmup 2s 2>&1) || true
		rate=$(awk '/^  transfers\/s/ {printf "%s ", $2}' <<<"$out")
		cpu=$(awk '/^  cpu\/transfer/ {printf "%s/%s ", $3, $6}' <<<"$out")
		other=$(sed -n 's/.*other \([0-9.]*\);.*/\1/p' <<<"$out" | tr '\n' ' ')
		printf 'round %d %-24s transfers/s %s| cpu us (paysvc/pg) %s| other %s| %s failed checks\n' \
			"$i" "$(basename -- "$bin")" "$rate" "$cpu" "$other" "$(grep -c FAIL <<<"$out" || true)"
	done
done

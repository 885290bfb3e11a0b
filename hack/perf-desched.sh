#!/usr/bin/env bash
# The descheduling loop benchmark of test/perf (build tag perf; never part of
# `make test`): one loop of the real descheduler (RemoveDuplicates and
# LowNodeUtilization) over the sandbox's control plane, with DefaultEvictor
# alone and with BudgetAwareEvictor added, PERF_DESCHED_COUNT times, one
# repetition per process (each builds its cluster), summarised by benchstat
# in _output/perf/.
#
#   PERF_DESCHED_NODES=100     the issue's size is 1000
#   PERF_DESCHED_PODS=3000     30000
#   PERF_DESCHED_BUDGETS=300   3000 (one PDB per application of 10 pods)
#   PERF_DESCHED_COUNT=3
#
# Each repetition holds /tmp/bg-heavy.lock while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
NODES="${PERF_DESCHED_NODES:-100}"
PODS="${PERF_DESCHED_PODS:-3000}"
BUDGETS="${PERF_DESCHED_BUDGETS:-300}"
COUNT="${PERF_DESCHED_COUNT:-3}"
LOCK="${PERF_LOCK:-/tmp/bg-heavy.lock}"

out=_output/perf
mkdir -p "$out"
# test/perf's TestMain wants etcd on PATH for scheduler_perf, even when only
# this benchmark runs.
hack/build-etcd.sh
if [ ! -x _output/perf.test ] || [ -n "$(find test/perf internal plugins sandbox -name '*.go' -newer _output/perf.test -print -quit)" ]; then
	flock "$LOCK" "$GO" test -tags perf -c -o _output/perf.test ./test/perf
fi

raw="$out/desched-${NODES}nodes-${PODS}pods.txt"
: >"$raw"
start=$(date +%s)
failed=""
for i in $(seq 1 "$COUNT"); do
	echo "repetition $i of $COUNT" >&2
	# flock -o: the lock is not handed down to the binary's children, so a
	# run that is killed frees it. A failed repetition does not stop the
	# others; the script fails at the end.
	if ! (cd test/perf && flock -o "$LOCK" ../../_output/perf.test \
		-test.run '^$' -test.bench BenchmarkDeschedulingLoop -test.benchtime 1x -test.count 1 -test.timeout 60m \
		-desched-nodes "$NODES" -desched-pods "$PODS" -desched-budgets "$BUDGETS" 2>/dev/null) |
		grep -E '^(goos|goarch|pkg|cpu|Benchmark|--- FAIL|FAIL|ok|PASS)|descheduler_test' | tee -a "$raw" >&2; then
		failed="$failed $i"
	fi
done
echo "wall time: $(($(date +%s) - start)) s for $COUNT repetitions" >&2

summary="$out/desched-${NODES}nodes-${PODS}pods.benchstat.txt"
"$GO" tool -modfile=hack/tools/go.mod benchstat -col /evictor "$raw" | tee "$summary"
echo "raw: $raw; summary: $summary" >&2
if [ -n "$failed" ]; then
	echo "FAIL: repetition(s)$failed failed; the messages are in $raw" >&2
	exit 1
fi

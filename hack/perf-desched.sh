#!/usr/bin/env bash
# The descheduling loop benchmark of test/perf (build tag perf; never part of
# `make test`): one loop of the real descheduler (RemoveDuplicates and
# LowNodeUtilization) over the sandbox's control plane, with DefaultEvictor
# alone and with BudgetAwareEvictor added, PERF_DESCHED_COUNT times,
# summarised by benchstat in _output/perf/. By default each repetition is a
# process of its own, which builds its cluster; PERF_DESCHED_SHARED=1 runs
# them in one process (-test.count), on one cluster built once and put back
# whole after each loop, which at 1,000 nodes saves a cluster build for
# every repetition after the first.
#
#   PERF_DESCHED_NODES=100     the issue's size is 1000
#   PERF_DESCHED_PODS=3000     30000
#   PERF_DESCHED_BUDGETS=300   3000 (one PDB per application of 10 pods)
#   PERF_DESCHED_COUNT=3
#   PERF_DESCHED_SHARED=0      1: every repetition in one process
#   PERF_DESCHED_TIMEOUT=3h    one process's limit (-test.timeout)
#
# Each process holds /tmp/bg-heavy.lock while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
NODES="${PERF_DESCHED_NODES:-100}"
PODS="${PERF_DESCHED_PODS:-3000}"
BUDGETS="${PERF_DESCHED_BUDGETS:-300}"
COUNT="${PERF_DESCHED_COUNT:-3}"
SHARED="${PERF_DESCHED_SHARED:-0}"
TIMEOUT="${PERF_DESCHED_TIMEOUT:-3h}"
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
processes=$COUNT
perprocess=1
if [ "$SHARED" = 1 ]; then
	processes=1
	perprocess=$COUNT
fi
for i in $(seq 1 "$processes"); do
	echo "process $i of $processes ($perprocess repetition(s) each)" >&2
	# flock -o: the lock is not handed down to the binary's children, so a
	# run that is killed frees it. A failed repetition does not stop the
	# others; the script fails at the end.
	if ! (cd test/perf && flock -o "$LOCK" ../../_output/perf.test \
		-test.run '^$' -test.bench BenchmarkDeschedulingLoop -test.benchtime 1x -test.count "$perprocess" -test.timeout "$TIMEOUT" \
		-desched-nodes "$NODES" -desched-pods "$PODS" -desched-budgets "$BUDGETS" 2>/dev/null) |
		grep -E '^(goos|goarch|pkg|cpu|Benchmark|--- FAIL|FAIL|ok|PASS)|descheduler_test' | tee -a "$raw" >&2; then
		failed="$failed $i"
	fi
done
echo "wall time: $(($(date +%s) - start)) s for $COUNT repetitions in $processes process(es)" >&2

summary="$out/desched-${NODES}nodes-${PODS}pods.benchstat.txt"
"$GO" tool -modfile=hack/tools/go.mod benchstat -col /evictor "$raw" | tee "$summary"
echo "raw: $raw; summary: $summary" >&2
if [ -n "$failed" ]; then
	echo "FAIL: process(es)$failed failed; the messages are in $raw" >&2
	exit 1
fi

#!/usr/bin/env bash
# The descheduling loop benchmark of test/perf (build tag perf; never part of
# `make test`): one loop of the real descheduler (RemoveDuplicates and
# LowNodeUtilization) over the sandbox's control plane, with DefaultEvictor
# alone and with BudgetAwareEvictor added, PERF_DESCHED_COUNT pairs (one loop
# with each evictor), summarised by benchstat in _output/perf/. By default
# each pair is a process of its own, which builds its cluster;
# PERF_DESCHED_SHARED=1 runs every pair in one process (-desched-pairs), on
# one cluster built once and put back whole after each loop, which at 1,000
# nodes saves a cluster build for every pair after the first. The order
# alternates from pair to pair: DefaultEvictor first in odd pairs,
# BudgetAwareEvictor first in even ones; each pair's order is printed into
# the raw output ("evictor order: A, B"), where hack/perfreport reads it.
#
#   PERF_DESCHED_NODES=100     the issue's size is 1000
#   PERF_DESCHED_PODS=3000     30000
#   PERF_DESCHED_BUDGETS=300   3000 (one PDB per application of 10 pods)
#   PERF_DESCHED_COUNT=3       pairs
#   PERF_DESCHED_SHARED=0      1: every pair in one process
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
	# Process i's first pair is pair i (one pair a process) or pair 1.
	order=DefaultEvictor,BudgetAwareEvictor
	if [ $((i % 2)) = 0 ]; then
		order=BudgetAwareEvictor,DefaultEvictor
	fi
	echo "process $i of $processes ($perprocess pair(s) each, the first $order)" >&2
	# flock -o: the lock is not handed down to the binary's children, so a
	# run that is killed frees it. A failed pair does not stop the others;
	# the script fails at the end.
	if ! (cd test/perf && flock -o "$LOCK" ../../_output/perf.test \
		-test.run '^$' -test.bench BenchmarkDeschedulingLoop -test.benchtime 1x -test.count 1 -test.timeout "$TIMEOUT" \
		-desched-nodes "$NODES" -desched-pods "$PODS" -desched-budgets "$BUDGETS" \
		-desched-pairs "$perprocess" -desched-evictor-order "$order" 2>/dev/null) |
		grep -E '^(goos|goarch|pkg|cpu|Benchmark|evictor order:|--- FAIL|FAIL|ok|PASS)|descheduler_test' | tee -a "$raw" >&2; then
		failed="$failed $i"
	fi
done
echo "wall time: $(($(date +%s) - start)) s for $COUNT pairs in $processes process(es)" >&2

# -ignore /pair: with PERF_DESCHED_SHARED=1 the sub-benchmarks are
# pair=<i>/evictor=<name>; the pairs are repetitions, not rows.
summary="$out/desched-${NODES}nodes-${PODS}pods.benchstat.txt"
"$GO" tool -modfile=hack/tools/go.mod benchstat -col /evictor -ignore /pair "$raw" | tee "$summary"
echo "raw: $raw; summary: $summary" >&2
if [ -n "$failed" ]; then
	echo "FAIL: process(es)$failed failed; the messages are in $raw" >&2
	exit 1
fi

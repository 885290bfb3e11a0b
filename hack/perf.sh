#!/usr/bin/env bash
# The scale benchmarks of test/perf (build tag perf; never part of
# `make test`). Builds etcd (hack/build-etcd.sh) and the test binary, then
# runs BenchmarkPerfScheduling at PERF_NODES nodes (upstream's PreemptionBasic
# and PreemptionAsync unchanged, and budgetguard's PreemptionBasicBudgets; at
# 1000 nodes also upstream's PreemptionPodGroupDisruptionMode workloads; each
# under DefaultPreemption and BudgetAwarePreemption) PERF_COUNT times,
# one repetition per process, and summarises them with benchstat. Raw output
# and the summary go to _output/perf/. docs/performance.md has the figures.
#
#   PERF_NODES=100    100, 500 or 1000 (budgets.yaml has those sizes)
#   PERF_COUNT=10     repetitions; benchstat wants at least 10
#   PERF_BENCH=...    the -test.bench pattern (default: BenchmarkPerfScheduling)
#   PERF_TIMEOUT=3h   one repetition's limit (-test.timeout)
#
# Each repetition holds /tmp/bg-heavy.lock while it runs, so that it does not
# share the machine's cores with another heavy job. The plugins' order
# alternates: DefaultPreemption first in odd repetitions, BudgetAwarePreemption
# first in even ones; each process prints its order ("plugin order: A, B")
# into the raw output, where hack/perfreport reads it.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
PERF_NODES="${PERF_NODES:-100}"
PERF_COUNT="${PERF_COUNT:-10}"
PERF_BENCH="${PERF_BENCH:-BenchmarkPerfScheduling}"
PERF_TIMEOUT="${PERF_TIMEOUT:-3h}"
LOCK="${PERF_LOCK:-/tmp/bg-heavy.lock}"

out=_output/perf
mkdir -p "$out"
hack/build-etcd.sh
flock "$LOCK" "$GO" test -tags perf -c -o _output/perf.test ./test/perf

# pods_per_second adds "<n> pods/s" to each benchmark line that reports
# measured-pods and SchedulingDuration/Duration: the measured phase's pods over
# its duration. That duration ends on scheduler_perf's 1-second poll, so a
# phase of a few seconds is resolved to a second; bound-pods/s, which test/perf
# reports from the pods' own bind times, is the figure docs/performance.md
# uses. scheduler_perf's SchedulingThroughput samples every second and is
# missing when the phase is shorter.
pods_per_second() {
	awk -F'\t' '
		/^Benchmark/ {
			pods = ""; dur = ""
			for (i = 3; i <= NF; i++) {
				n = split($i, f, " ")
				if (n == 2 && f[2] == "measured-pods") pods = f[1]
				if (n == 2 && f[2] == "SchedulingDuration/Duration") dur = f[1]
			}
			if (pods != "" && dur > 0) { printf "%s\t%.4g pods/s\n", $0, pods / dur; next }
		}
		{ print }'
}

raw="$out/perf-${PERF_NODES}nodes.txt"
: >"$raw"
start=$(date +%s)
failed=""
for i in $(seq 1 "$PERF_COUNT"); do
	order=DefaultPreemption,BudgetAwarePreemption
	if [ $((i % 2)) = 0 ]; then
		order=BudgetAwarePreemption,DefaultPreemption
	fi
	echo "repetition $i of $PERF_COUNT ($order)" >&2
	# The binary runs in test/perf: scheduler_perf's paths are relative to it.
	# flock -o: the lock is not handed down to the binary's children (the
	# etcd scheduler_perf starts), so a run that is killed frees it.
	# A repetition in which a workload fails still reports the others; the
	# failure's message is in $raw, and the script fails at the end.
	if ! (cd test/perf && flock -o "$LOCK" ../../_output/perf.test \
		-test.run '^$' -test.bench "$PERF_BENCH" -test.benchtime 1x -test.count 1 -test.timeout "$PERF_TIMEOUT" \
		-perf-scheduling-label-filter "budgetguard,nodes-${PERF_NODES}" -perf-nodes "$PERF_NODES" \
		-perf-plugin-order "$order" \
		-data-items-dir "../../$out/data") | pods_per_second | tee -a "$raw" | grep -E '^(Benchmark|plugin order:|--- FAIL|FAIL|ok|PASS)' >&2; then
		failed="$failed $i"
	fi
done
echo "wall time: $(($(date +%s) - start)) s for $PERF_COUNT repetitions" >&2

# Every figure in one file; the ones docs/performance.md quotes on screen.
summary="$out/perf-${PERF_NODES}nodes.benchstat.txt"
"$GO" tool -modfile=hack/tools/go.mod benchstat -col /plugin "$raw" >"$summary"
"$GO" tool -modfile=hack/tools/go.mod benchstat -col /plugin \
	-filter '.unit:/^(bound-pods\/s|pods\/s|SchedulingThroughput\/Average|scheduler_framework_extension_point_duration_ms\/Perc(50|99)|victims|overbudget-victims|heap-MiB)$/' "$raw"
echo "raw: $raw; every figure: $summary" >&2
echo "to keep it: copy $raw to docs/perf-data/<date>-perf-${PERF_NODES}nodes-${PERF_COUNT}reps-<commit>.txt with # date:, # commit: and # command: lines on top, name it in a generated section of docs/performance.md, and run make perf-report" >&2
if [ -n "$failed" ]; then
	echo "FAIL: a workload failed in repetition(s)$failed; the messages are in $raw" >&2
	exit 1
fi

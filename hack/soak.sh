#!/usr/bin/env bash
# The soak: TestSoak (test/integration, build tag soak), the churn of every
# actor against the same budgets for SOAK_DURATION (default 10m), judged by
# the independent auditor. It prints the disruptions by actor, the refusals,
# the 429s and the violations at the end; SOAK_FAULTS=1 puts every actor's
# client behind the fault injector; SOAK_GANGS=1 adds pod groups. Not part
# of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
duration=${SOAK_DURATION:-10m}
args=(-soak.duration="$duration")
if [[ -n "${SOAK_SEED:-}" ]]; then
	args+=(-soak.seed="$SOAK_SEED")
fi
if [[ -n "${SOAK_FAULTS:-}" && "${SOAK_FAULTS}" != 0 ]]; then
	args+=(-soak.faults)
fi
# SOAK_GANGS=1: the GenericWorkload gate on, and pod groups in the churn
# (gang preemptors, an app disrupted whole): test/integration's -gangs.
if [[ -n "${SOAK_GANGS:-}" && "${SOAK_GANGS}" != 0 ]]; then
	args+=(-gangs)
fi
exec "$GO" test -tags soak -count=1 -timeout 60m -run '^TestSoak$' -v ./test/integration -args "${args[@]}"

#!/usr/bin/env bash
# Runs the integration tests: test/integration/ against one shared in-process
# control plane, and test/scenarios/, which runs every example scenario through
# the sandbox binary's runner (a control plane per run), test/e2e and
# test/kubectl. Two packages run at a time (-p 2, one per core): each holds a
# control plane, and most of their time is spent waiting (a scenario's settle
# and staysPending steps, a budget's status, a loop's interval), so one after
# another left the 2 cores idle for two thirds of the run (11 min against 6).
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
dir=test

pkgs=""
if [ -d "$dir" ]; then
	pkgs="$("$GO" list "./$dir/...")"
fi
if [ -z "$pkgs" ]; then
	echo "no integration test packages under $dir yet; nothing to run"
	exit 0
fi

exec "$GO" tool -modfile=hack/tools/go.mod gotestsum --format testname -- \
	-vet=off -ldflags=-w -count=1 -p 2 -timeout 25m "./$dir/..."

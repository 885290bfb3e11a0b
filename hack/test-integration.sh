#!/usr/bin/env bash
# Runs the integration tests: test/integration/ against one shared in-process
# control plane, and test/scenarios/, which runs every example scenario through
# the sandbox binary's runner (a control plane per run) and loads the demo's
# HTML timeline in headless Chromium (the test installs it with
# hack/install-chromium.sh when it is missing), test/e2e and test/kubectl. Two packages run at a time (-p 2): each holds a control plane,
# and one keeps a core only half busy (6.5 min instead of 12 at -p 1, measured
# warm). The failure once seen at -p 2 (a victim terminating for minutes after
# its scheduler was SIGKILLed) was the simulated kubelet leaving a pod whose
# delete lost its second phase with its client; it finishes such pods now.
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

"$GO" tool -modfile=hack/tools/go.mod gotestsum --format testname -- \
	-vet=off -ldflags=-w -count=1 -p 2 -timeout 25m "./$dir/..."

# The promise tests once more with pod groups (-gangs: the GenericWorkload
# gate on for a control plane of their own; see churn_gangs_test.go), on
# their fixed seeds.
if [ -d "$dir/integration" ]; then
	exec "$GO" tool -modfile=hack/tools/go.mod gotestsum --format testname -- \
		-vet=off -ldflags=-w -count=1 -timeout 25m \
		-run '^TestPromiseAllActors(UnderFaults)?$' "./$dir/integration" -args -gangs
fi

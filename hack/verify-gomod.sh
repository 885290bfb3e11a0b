#!/usr/bin/env bash
# Fails when `go mod tidy` would change go.mod or go.sum, of the main module or
# of the tools module. It never rewrites them.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
status=0
for dir in . hack/tools; do
	if ! (cd "$dir" && "$GO" mod tidy -diff); then
		echo "$dir/go.mod is not tidy: run 'go mod tidy' in $dir and commit the result." >&2
		status=1
	fi
done
exit "$status"

#!/usr/bin/env bash
# Fails when docs/performance.md differs from what hack/perfreport generates
# from the raw benchmark output in docs/perf-data/: a table edited by hand,
# a raw file added or changed without `make perf-report`, a raw file the tool
# cannot parse (the error names the file and the line), a raw file no table
# uses, or a table outside the generated sections. Runs the tool's unit tests
# first.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
"$GO" test -count=1 ./hack/perfreport/
"$GO" run ./hack/perfreport -check -data docs/perf-data -page docs/performance.md

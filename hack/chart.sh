#!/usr/bin/env bash
# make chart: charts/budgetguard packaged with this build's version
# (hack/version.sh: the chart's version without the v, its appVersion and so
# its images' tag with it) as _output/chart/budgetguard-<version>.tgz (or into
# the directory given as $1; $2, if given, gets the versioned chart unpacked).
# Reproducible: every timestamp is the commit's time (SOURCE_DATE_EPOCH
# overrides it). make release packages the chart with it.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
out="$(realpath -m "${1:-_output/chart}")"
version="${VERSION:-$(hack/version.sh)}"
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
chart="$(realpath charts/budgetguard)"
dir=()
if [[ -n "${2:-}" ]]; then dir=(--dir "$(realpath -m "$2")"); fi

mkdir -p "$out"
rm -f "$out"/budgetguard-*.tgz
("$GO" run ./hack/release chart --epoch "$epoch" --version "$version" \
	--out "$out/budgetguard-${version#v}.tgz" "${dir[@]}" "$chart")
echo "$out/budgetguard-${version#v}.tgz"

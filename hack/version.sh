#!/usr/bin/env bash
# Prints budgetguard's version, the one every artifact carries (binaries'
# --version, image tags, the chart's version and appVersion, the krew
# manifest, the rendered manifests). Its one source is the file VERSION, the
# release being prepared:
#   - on a commit tagged with that version (git tag v0.1.0): v0.1.0. A tag
#     that differs from VERSION is an error: tag the commit that says so.
#   - on any other commit: v0.1.0-dev.g<commit>, a semantic version that is
#     also a valid image tag and chart version;
#   - outside git: v0.1.0-dev.
# A modified tree does not change the version (the image tags, the chart and
# the binaries of one build must agree); --version prints the commit and
# whether the tree was modified separately.
set -euo pipefail
cd "$(dirname "$0")/.."

want="$(tr -d ' \t\r\n' <VERSION)"
if ! [[ "$want" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "VERSION: \"$want\" is not vMAJOR.MINOR.PATCH" >&2
	exit 1
fi
if ! commit="$(git rev-parse --short=7 HEAD 2>/dev/null)"; then
	echo "$want-dev"
	exit 0
fi
tags="$(git tag --points-at HEAD 'v*' 2>/dev/null || true)"
for t in $tags; do
	if [[ "$t" == "$want" ]]; then
		echo "$want"
		exit 0
	fi
done
for t in $tags; do
	if [[ "$t" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
		echo "HEAD is tagged $t but VERSION says $want: change VERSION in the tagged commit" >&2
		exit 1
	fi
done
echo "$want-dev.g$commit"

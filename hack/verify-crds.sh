#!/usr/bin/env bash
# Fails when the CRDs checked in under manifests/crds, or the deep copies of
# apis/, differ from what hack/update-crds.sh generates now.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/generated" "$tmp/checked-in"

DEEPCOPY_TO="$tmp/zz_generated.deepcopy.go" hack/update-crds.sh "$tmp/generated"
cp manifests/crds/*.yaml "$tmp/checked-in/" 2>/dev/null || true

status=0
if ! diff -ru "$tmp/checked-in" "$tmp/generated"; then
	echo "manifests/crds is stale: run 'make manifests' and commit the result." >&2
	status=1
fi
if ! diff -u apis/kruise/policy/v1beta1/zz_generated.deepcopy.go "$tmp/zz_generated.deepcopy.go"; then
	echo "apis/kruise/policy/v1beta1/zz_generated.deepcopy.go is stale: run 'make manifests' and commit the result." >&2
	status=1
fi
exit "$status"

#!/usr/bin/env bash
# Fails when the CRDs checked in under manifests/crds, or the deep copies of
# apis/ and of the plugins' args, differ from what hack/update-crds.sh generates now.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/generated" "$tmp/checked-in"

DEEPCOPY_TO="$tmp/deepcopy" hack/update-crds.sh "$tmp/generated"
cp manifests/crds/*.yaml "$tmp/checked-in/" 2>/dev/null || true

status=0
if ! diff -ru "$tmp/checked-in" "$tmp/generated"; then
	echo "manifests/crds is stale: run 'make manifests' and commit the result." >&2
	status=1
fi
for f in apis/kruise/policy/v1beta1/zz_generated.deepcopy.go plugins/budgetevictor/zz_generated.deepcopy.go plugins/budgetpreemption/zz_generated.deepcopy.go; do
	pkg="$(basename "$(dirname "$f")")"
	if ! diff -u "$f" "$tmp/deepcopy/$pkg.go"; then
		echo "$f is stale: run 'make manifests' and commit the result." >&2
		status=1
	fi
done
if [ "$(ls "$tmp/deepcopy" | wc -l)" -ne 3 ]; then
	echo "controller-gen generated deep copies for other packages than the three checked in: $(ls "$tmp/deepcopy")" >&2
	status=1
fi
exit "$status"

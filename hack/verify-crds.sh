#!/usr/bin/env bash
# Fails when the CRDs checked in under manifests/crds differ from what
# hack/update-crds.sh generates now.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/generated" "$tmp/checked-in"

hack/update-crds.sh "$tmp/generated"
cp manifests/crds/*.yaml "$tmp/checked-in/" 2>/dev/null || true

if ! diff -ru "$tmp/checked-in" "$tmp/generated"; then
	echo "manifests/crds is stale: run 'make manifests' and commit the result." >&2
	exit 1
fi

#!/usr/bin/env bash
# Regenerates the CRDs in manifests/crds (or in the directory given as $1) with
# controller-gen, from the Go types of the main module's kruise-api version.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
out="${1:-manifests/crds}"

mkdir -p "$out"
rm -f "$out"/*.yaml
"$GO" tool -modfile=hack/tools/go.mod controller-gen \
	crd \
	paths=github.com/openkruise/kruise-api/policy/v1alpha1 \
	output:crd:artifacts:config="$out"

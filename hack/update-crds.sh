#!/usr/bin/env bash
# Regenerates, with the pinned controller-gen:
# - the deep copies of budgetguard's own API types (apis/...), unless
#   DEEPCOPY_TO names a file to write the one package's deep copies to;
# - the CRDs in manifests/crds (or in the directory given as $1): OpenKruise's
#   PodUnavailableBudget from kruise-api's policy/v1alpha1 types (the main
#   module's version) and our policy/v1beta1 types, one CRD that serves both,
#   v1beta1 stored, as OpenKruise's own CRD does.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
out="${1:-manifests/crds}"
controllergen=("$GO" tool -modfile=hack/tools/go.mod controller-gen)

if [ -n "${DEEPCOPY_TO:-}" ]; then
	"${controllergen[@]}" object paths=./apis/kruise/policy/v1beta1 output:object:stdout >"$DEEPCOPY_TO"
else
	"${controllergen[@]}" object paths=./apis/...
fi
mkdir -p "$out"
rm -f "$out"/*.yaml
"${controllergen[@]}" \
	crd \
	paths=github.com/openkruise/kruise-api/policy/v1alpha1 \
	paths=./apis/kruise/policy/v1beta1 \
	output:crd:artifacts:config="$out"

#!/usr/bin/env bash
# Renders charts/budgetguard (or the chart directory given as $2) into
# manifests/ (or into the directory given as
# $1): the chart is the one source of the shipped objects. The
# kustomization.yaml files of manifests/ are not rendered; they stay as they
# are.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
out="$(realpath -m "${1:-manifests}")"
chart="$(realpath "${2:-charts/budgetguard}")"

mkdir -p "$out"
"$GO" run ./hack/rendermanifests "$chart" "$out"

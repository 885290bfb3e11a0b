#!/usr/bin/env bash
# The pinned helm (a tool of go.mod: it builds on the Kubernetes libraries
# budgetguard itself builds, so it costs seconds, not a second copy of them),
# built into _output/tools with the
# Kubernetes version budgetguard embeds as its default (helm template and
# helm lint check the chart's kubeVersion against it; a helm built by
# `go tool` assumes Kubernetes 1.20 and refuses the chart without
# --kube-version). Use it as helm:
#   hack/helm.sh template budgetguard charts/budgetguard -n kube-system
#   hack/helm.sh install budgetguard _output/release/budgetguard-0.1.0.tgz -n kube-system
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
GO="${GO:-go}"

kube="$(cd "$root" && "$GO" list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/kubernetes)"
if ! [[ "$kube" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
	echo "hack/helm.sh: k8s.io/kubernetes is at \"$kube\", not vMAJOR.MINOR.PATCH" >&2
	exit 1
fi
pkg=helm.sh/helm/v3/pkg/chartutil
bin="$root/_output/tools/helm"
# go build is quick when nothing changed (the build cache); it keeps the
# binary in step with go.mod.
(cd "$root" && "$GO" build -o "$bin" \
	-ldflags "-X $pkg.k8sVersionMajor=${BASH_REMATCH[1]} -X $pkg.k8sVersionMinor=${BASH_REMATCH[2]}" \
	helm.sh/helm/v3/cmd/helm)
exec "$bin" "$@"

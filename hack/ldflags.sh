#!/usr/bin/env bash
# Prints the -ldflags every budgetguard binary is built with:
#   - budgetguard's version (hack/version.sh, or $VERSION), which --version
#     and budgetguard_build_info report;
#   - the Kubernetes version the binary embeds (k8s.io/kubernetes in go.mod)
#     in k8s.io/component-base/version, which a kube-apiserver reports on
#     /version (the sandbox's: helm checks a chart's kubeVersion against it,
#     kubectl version prints it) and kube-scheduler puts in its user agent.
#     Without it they report v0.0.0-master+$Format:%H$.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
version="${VERSION:-$(hack/version.sh)}"
kube="$("$GO" list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/kubernetes)"
if ! [[ "$kube" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
	echo "hack/ldflags.sh: k8s.io/kubernetes is at \"$kube\", not vMAJOR.MINOR.PATCH" >&2
	exit 1
fi
cb=k8s.io/component-base/version
echo "-X github.com/budgetguard/budgetguard/internal/version.gitVersion=$version" \
	"-X $cb.gitVersion=$kube -X $cb.gitMajor=${BASH_REMATCH[1]} -X $cb.gitMinor=${BASH_REMATCH[2]}" \
	"-X $cb.gitTreeState=clean -X $cb.buildDate=1970-01-01T00:00:00Z"

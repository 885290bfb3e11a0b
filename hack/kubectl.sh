#!/usr/bin/env bash
# The pinned kubectl: a tool of go.mod at the Kubernetes version budgetguard
# embeds (k8s.io/kubernetes/cmd/kubectl; it builds on the libraries the
# binaries build on already), built into _output/tools with that version
# stamped (hack/ldflags.sh), so that `kubectl version` reports it and its
# version skew against the sandbox's API server is none. For a machine
# without kubectl, and for TestQuickStart, which runs README's quick start
# with it. Use it as kubectl:
#   hack/kubectl.sh --kubeconfig /tmp/sandbox.kubeconfig get nodes
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
GO="${GO:-go}"

bin="$root/_output/tools/kubectl"
# go build is quick when nothing changed (the build cache); it keeps the
# binary in step with go.mod.
(cd "$root" && "$GO" build -o "$bin" -ldflags "$(hack/ldflags.sh)" k8s.io/kubernetes/cmd/kubectl)
exec "$bin" "$@"

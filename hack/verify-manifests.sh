#!/usr/bin/env bash
# Lints charts/budgetguard, renders it in both descheduler modes with the
# helm the docs recommend (hack/helm.sh, without --kube-version), runs the
# chart's rendering tests (hack/rendermanifests) and make release's
# (hack/release), and fails when manifests/ differs from what
# hack/update-manifests.sh renders now.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
helm=(hack/helm.sh)

"${helm[@]}" lint --strict charts/budgetguard
for kind in Deployment CronJob; do
	for monitor in false true; do
		"${helm[@]}" template budgetguard charts/budgetguard --namespace budgetguard \
			--set descheduler.kind="$kind" --set serviceMonitor.enabled="$monitor" >/dev/null
	done
done

# -vet=off: golangci-lint, later in make verify, vets these packages; go
# test's vet would analyse every package they import (helm, Kubernetes).
"$GO" test -vet=off -count=1 ./hack/rendermanifests/ ./hack/release/

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
hack/update-manifests.sh "$tmp/rendered"
status=0
for f in $(cd "$tmp/rendered" && find . -type f | sort); do
	if ! diff -u "manifests/$f" "$tmp/rendered/$f"; then
		status=1
	fi
done
if [ "$status" != 0 ]; then
	echo "manifests/ is stale: run 'make manifests' and commit the result." >&2
	exit 1
fi

#!/usr/bin/env bash
# Checks the chart's alerts, charts/budgetguard/files/prometheusrules.yaml
# (the spec of the PrometheusRule that prometheusRule.enabled renders), with
# promtool: `promtool check rules` (syntax, PromQL, templates) and `promtool
# test rules` on charts/budgetguard/tests/ (each alert firing and not). It
# installs promtool first when it is missing (hack/install-promtool.sh), and
# fails when the spec of the PrometheusRule hack/helm.sh renders is not the
# file (hack/rendermanifests' TestPrometheusRule checks the same through
# helm's engine, with the rest of the object). That every metric and label
# the rules and the dashboard name is exported is test/e2e's
# (TestShippedArtifacts).
set -euo pipefail
cd "$(dirname "$0")/.."

promtool="$(hack/install-promtool.sh)"
rules=charts/budgetguard/files/prometheusrules.yaml

"$promtool" check rules "$rules"

# The PrometheusRule that `helm template` renders embeds the file: its spec,
# less two spaces of indentation, is the file line for line, and passes
# promtool too.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
hack/helm.sh template budgetguard charts/budgetguard --namespace kube-system \
	--set prometheusRule.enabled=true >"$tmp/chart.yaml"
awk '
	/^---/ { rule = 0; spec = 0 }
	/^kind: PrometheusRule$/ { rule = 1 }
	rule && spec { sub(/^  /, ""); print; next }
	rule && /^spec:$/ { spec = 1 }
' "$tmp/chart.yaml" >"$tmp/rendered.yaml"
if ! diff -u "$rules" "$tmp/rendered.yaml"; then
	echo "verify-prometheusrules: the spec of the PrometheusRule hack/helm.sh renders is not $rules" >&2
	exit 1
fi
"$promtool" check rules "$tmp/rendered.yaml"
shopt -s nullglob
tests=(charts/budgetguard/tests/*_test.yaml)
if [ ${#tests[@]} -eq 0 ]; then
	echo "verify-prometheusrules: no promtool tests in charts/budgetguard/tests/" >&2
	exit 1
fi
"$promtool" test rules "${tests[@]}"

# Every alert is tested: each one's name appears as an alertname in the tests.
alerts="$(sed -n 's/^  - alert: *//p' "$rules")"
if [ -z "$alerts" ]; then
	echo "verify-prometheusrules: found no '  - alert:' line in $rules" >&2
	exit 1
fi
status=0
for alert in $alerts; do
	if ! grep -qE "^ *alertname: *$alert *\$" "${tests[@]}"; then
		echo "verify-prometheusrules: alert $alert has no promtool test in charts/budgetguard/tests/" >&2
		status=1
	fi
done
exit "$status"

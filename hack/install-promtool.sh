#!/usr/bin/env bash
# Installs promtool, which hack/verify-prometheusrules.sh runs on the
# chart's PrometheusRule (charts/budgetguard/files/prometheusrules.yaml),
# from Debian's package prometheus when /usr/bin/promtool is missing; the
# project pins no promtool of its own. Prints promtool's path. Needs root
# (or sudo) and apt-get the first time; does nothing when promtool is there.
set -euo pipefail

promtool=/usr/bin/promtool
say() { echo "install-promtool: $*" >&2; }

if [ ! -x "$promtool" ]; then
	if ! command -v apt-get >/dev/null; then
		say "this host has no apt-get; install promtool (Debian's and Ubuntu's package prometheus) and run again"
		exit 1
	fi
	sudo=()
	if [ "$(id -u)" != 0 ]; then
		if ! command -v sudo >/dev/null; then
			say "needs root to install Debian's package prometheus (run as root, or install it yourself)"
			exit 1
		fi
		sudo=(sudo)
	fi
	log="$(mktemp)"
	trap 'rm -f "$log"' EXIT
	say "installing Debian's package prometheus for $promtool"
	export DEBIAN_FRONTEND=noninteractive
	# The package lists may be missing or old: update them once, and only
	# when the first try fails.
	if ! "${sudo[@]}" apt-get install -y --no-install-recommends prometheus >"$log" 2>&1; then
		"${sudo[@]}" apt-get update >>"$log" 2>&1 || true
		if ! "${sudo[@]}" apt-get install -y --no-install-recommends prometheus >>"$log" 2>&1; then
			tail -20 "$log" >&2
			say "apt-get install prometheus failed"
			exit 1
		fi
	fi
	if [ ! -x "$promtool" ]; then
		say "Debian's package prometheus installed no $promtool"
		exit 1
	fi
fi
echo "$promtool"

#!/usr/bin/env bash
# Installs Chromium, in which test/scenarios' TestScenarioPreemptionUnderPDB
# loads the sandbox's HTML timeline (sandbox run --html) headless, from
# Debian's package chromium when /usr/bin/chromium is missing; the project
# pins no browser of its own. Prints Chromium's path. Needs root (or sudo)
# and apt-get the first time; does nothing when Chromium is there.
set -euo pipefail

chromium=/usr/bin/chromium
say() { echo "install-chromium: $*" >&2; }

if [ ! -x "$chromium" ]; then
	if ! command -v apt-get >/dev/null; then
		say "this host has no apt-get; install Chromium (Debian's package chromium) at $chromium and run again"
		exit 1
	fi
	sudo=()
	if [ "$(id -u)" != 0 ]; then
		if ! command -v sudo >/dev/null; then
			say "needs root to install Debian's package chromium (run as root, or install it yourself)"
			exit 1
		fi
		sudo=(sudo)
	fi
	log="$(mktemp)"
	trap 'rm -f "$log"' EXIT
	say "installing Debian's package chromium for $chromium"
	export DEBIAN_FRONTEND=noninteractive
	# The package lists may be missing or old: update them once, and only
	# when the first try fails.
	if ! "${sudo[@]}" apt-get install -y --no-install-recommends chromium >"$log" 2>&1; then
		"${sudo[@]}" apt-get update >>"$log" 2>&1 || true
		if ! "${sudo[@]}" apt-get install -y --no-install-recommends chromium >>"$log" 2>&1; then
			tail -20 "$log" >&2
			say "apt-get install chromium failed"
			exit 1
		fi
	fi
	if [ ! -x "$chromium" ]; then
		say "Debian's package chromium installed no $chromium"
		exit 1
	fi
fi
echo "$chromium"

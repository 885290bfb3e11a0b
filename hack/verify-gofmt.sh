#!/usr/bin/env bash
# Fails, listing the files, when gofmt would change any Go file that git tracks
# or would track (untracked files that .gitignore does not exclude count too).
set -euo pipefail
cd "$(dirname "$0")/.."

files="$(git ls-files --cached --others --exclude-standard -- '*.go' ':!:hack/tools/**' | while read -r f; do [ -f "$f" ] && echo "$f"; done)"
[ -n "$files" ] || exit 0

# shellcheck disable=SC2086 # one path per word; Go file names have no spaces here.
bad="$(gofmt -l $files)"
if [ -n "$bad" ]; then
	echo "gofmt would change these files (run 'gofmt -w' on them):" >&2
	echo "$bad" >&2
	exit 1
fi

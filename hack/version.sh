#!/usr/bin/env bash
# Prints budgetguard's version: git describe, or v0.0.0-<commit> before the
# first tag, with -dirty for a modified tree; v0.0.0-unknown outside git.
set -euo pipefail
v="$(git describe --tags --always --dirty 2>/dev/null || echo unknown)"
case "$v" in
v*) echo "$v" ;;
*) echo "v0.0.0-$v" ;;
esac

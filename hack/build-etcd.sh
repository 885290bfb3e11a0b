#!/usr/bin/env bash
# Builds the etcd binary that test/perf (upstream's scheduler_perf) runs, into
# _output/bin/etcd, from the go.etcd.io/etcd/server/v3 version that go.mod
# requires (Debian's etcd is 3.4, too old for Kubernetes 1.36). etcd's main
# package imports packages (its gRPC proxy) that budgetguard's go.sum does not
# list, so it is built in a throwaway module under _output, with etcd's own
# dependency versions; go.mod and go.sum are left alone. Does nothing when the
# binary already reports that version.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
out="$PWD/_output/bin/etcd"
version="$("$GO" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
want="${version#v}"

# grep and sed read all of etcd's output: with pipefail, a reader that stops
# early (grep -q, head) can kill etcd with SIGPIPE and fail the pipeline.
if [ -x "$out" ] && "$out" --version 2>/dev/null | grep "^etcd Version: ${want}\$" >/dev/null; then
	exit 0
fi

work="$PWD/_output/etcd-build"
rm -rf "$work"
mkdir -p "$work" "$(dirname "$out")"
(
	cd "$work"
	"$GO" mod init budgetguard.local/etcd-build >/dev/null 2>&1
	if ! "$GO" get "go.etcd.io/etcd/server/v3@${version}" >get.log 2>&1; then
		cat get.log >&2
		exit 1
	fi
	"$GO" build -o "$out" go.etcd.io/etcd/server/v3
)
rm -rf "$work"
"$out" --version | sed -n 1p

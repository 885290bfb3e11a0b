#!/usr/bin/env bash
# make e2e-node: budgetguard's release on a real single-node cluster, offline
# (docs/e2e-node.md). It installs what the host lacks from Debian's packages
# (containerd, runc, the CNI plugins, iptables), builds etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and the kubelet from the pinned
# modules, the release's images (make images) and the run's own (pause, the
# test application), brings the node up (internal/realnode), runs
# ./test/e2enode against it, and tears everything down, even when a test
# fails or the run is interrupted; then it checks that the host is as it
# was before.
#
#   hack/e2e-node.sh            all of it (make e2e-node)
#   hack/e2e-node.sh up         install, build and bring the node up, and leave it running
#                               (KUBECONFIG=/run/budgetguard-e2e/admin.kubeconfig)
#   hack/e2e-node.sh test       run ./test/e2enode against the running node
#   hack/e2e-node.sh down       tear it down and check the host
#
# E2E_NODE_RUN narrows the tests (go test -run). Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
out="$PWD/_output/e2e-node"
bin="$out/bin"
what="${1:-all}"

say() { echo "e2e-node: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
	say "needs root: a kubelet, containerd and the node's network need it (run: sudo make e2e-node)"
	exit 1
fi

install_packages() {
	local missing=()
	command -v containerd >/dev/null || missing+=(containerd)
	command -v runc >/dev/null || missing+=(runc)
	[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
	command -v iptables >/dev/null || missing+=(iptables)
	command -v ip >/dev/null || missing+=(iproute2)
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing Debian packages: ${missing[*]}"
	if ! command -v apt-get >/dev/null; then
		say "this host has no apt-get; install ${missing[*]} (Debian's package names) and run again"
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${missing[@]}" >"$out/apt.log" 2>&1; then
		apt-get update >>"$out/apt.log" 2>&1 || true
		if ! apt-get install -y --no-install-recommends "${missing[@]}" >>"$out/apt.log" 2>&1; then
			tail -20 "$out/apt.log" >&2
			say "apt-get install ${missing[*]} failed (the whole log: $out/apt.log)"
			exit 1
		fi
	fi
}

# The control plane and the kubelet from k8s.io/kubernetes at the version
# go.mod requires, in a throwaway module with budgetguard's go.mod and
# go.sum (the main packages need a few sums budgetguard's go.sum lacks;
# -mod=mod adds them there, never here). Built as make test builds the
# same packages (cgo as the host has it, no -trimpath), so that after make
# test only the kubelet's own packages compile; warm runs only relink.
build_kubernetes() {
	local work="$out/build" ldflags
	ldflags="-s -w $(hack/ldflags.sh)"
	mkdir -p "$work" "$bin"
	sed 's#^module .*#module budgetguard.local/e2e-node-build#' go.mod >"$work/go.mod"
	cp go.sum "$work/go.sum"
	cat >"$work/tools.go" <<-'EOF'
		//go:build tools

		package tools

		import (
			_ "k8s.io/kubernetes/cmd/kube-apiserver"
			_ "k8s.io/kubernetes/cmd/kube-controller-manager"
			_ "k8s.io/kubernetes/cmd/kube-scheduler"
			_ "k8s.io/kubernetes/cmd/kubelet"
		)
	EOF
	say "building kube-apiserver, kube-controller-manager, kube-scheduler, kubelet ($("$GO" list -m -f '{{.Version}}' k8s.io/kubernetes))"
	(cd "$work" && "$GO" build -mod=mod -ldflags "$ldflags" -o "$bin/" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet)
	hack/build-etcd.sh >/dev/null
	cp _output/bin/etcd "$bin/etcd"
}

# The release's images (make images), and the run's own: the pod sandbox's
# pause and the test application, for this host's architecture, packed as
# the release's are.
build_images() {
	local arch
	arch="$("$GO" env GOARCH)"
	say "building the release's images (make images) and the run's own (pause, webapp)"
	make --no-print-directory images >"$out/images.log" 2>&1 || { tail -30 "$out/images.log" >&2; exit 1; }
	mkdir -p "$out/images/bin/linux_$arch"
	CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$out/images/bin/linux_$arch/" ./test/e2enode/images/pause ./test/e2enode/images/webapp
	(cd hack/tools && "$GO" run ./imagebuild --bin-dir "$out/images/bin" --out "$out/images" --version e2e \
		--revision "$(git rev-parse HEAD 2>/dev/null || echo unknown)" --registry budgetguard.local/e2e \
		--platforms "linux/$arch" pause webapp >/dev/null)
	make --no-print-directory chart >/dev/null
}

# The node's daemons that e2enode up starts outlive this script; they must
# not inherit the lock's descriptor (9, below), or test and down could not
# take it while the node is up.
e2enode() { "$bin/e2enode" "$@" 9>&-; }

up() {
	mkdir -p "$out"
	install_packages
	"$GO" build -o "$bin/e2enode" ./hack/e2enode
	build_kubernetes
	build_images
	e2enode check
	if [ ! -e /run/budgetguard-e2e ]; then
		e2enode snapshot "$out/host-before.json"
	fi
	e2enode up _output/images/scheduler.oci.tar _output/images/descheduler.oci.tar \
		"$out/images/pause.oci.tar" "$out/images/webapp.oci.tar"
}

run_tests() {
	local run=()
	if [ -n "${E2E_NODE_RUN:-}" ]; then run=(-run "$E2E_NODE_RUN"); fi
	# -vet=off: make verify vets ./test/e2enode (golangci-lint, tag e2enode);
	# go test's vet would analyse every package it imports once more.
	"$GO" test -tags e2enode -vet=off -ldflags=-w -count=1 -v -timeout 30m "${run[@]}" ./test/e2enode \
		-args -e2e-node.kubeconfig=/run/budgetguard-e2e/admin.kubeconfig -e2e-node.audit-log=/run/budgetguard-e2e/audit/audit.log
}

down() {
	local rc=0
	if [ ! -x "$bin/e2enode" ]; then "$GO" build -o "$bin/e2enode" ./hack/e2enode; fi
	e2enode down || rc=1
	if [ -f "$out/host-before.json" ]; then
		if e2enode compare "$out/host-before.json"; then
			say "the host is as it was before the run"
			rm -f "$out/host-before.json"
		else
			rc=1
		fi
	fi
	return $rc
}

# One run at a time: two would share the node's addresses and directories,
# and the second one's teardown would end the first one's node.
lock=/tmp/bg-e2e-node.lock
exec 9>"$lock"
if ! flock -n 9; then
	say "another e2e-node run holds $lock; wait for it, or end it with hack/e2e-node.sh down once it has exited"
	exit 1
fi

case "$what" in
all)
	start=$(date +%s)
	trap 'rc=$?; trap - EXIT INT TERM; down || rc=1; say "$(( $(date +%s) - start )) s in all"; exit $rc' EXIT
	trap 'exit 130' INT TERM
	up
	say "node up after $(( $(date +%s) - start )) s"
	run_tests
	;;
up) up ;;
test) run_tests ;;
down) down ;;
*)
	say "unknown command \"$what\"; want all, up, test or down"
	exit 2
	;;
esac

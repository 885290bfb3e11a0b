#!/usr/bin/env bash
# make release: everything a budgetguard release publishes, into
# _output/release (or the directory given as $1), offline (every tool from
# the Go module proxy, pinned) and reproducible (the same commit gives the
# same bytes; every timestamp is the commit's time, SOURCE_DATE_EPOCH
# overrides it):
#   images/{scheduler,descheduler}.oci.tar  OCI image archives, linux/amd64
#                                           and linux/arm64 (make images)
#   kubectl-budgetguard_<os>_<arch>.tar.gz  the kubectl plugin for linux and
#   kubectl-budgetguard_windows_<arch>.zip  darwin, and windows, on amd64 and
#                                           arm64, with LICENSE
#   budgetguard.yaml                        the krew manifest, with those
#                                           archives' sha256
#   budgetguard-<version>.tgz               the chart (helm package), version
#                                           and appVersion the release's
#   manifests/                              manifests/ rendered from it
#   checksums.txt                           sha256 of every archive
# All of it carries one version, hack/version.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
out="$(realpath -m "${1:-_output/release}")"
version="$(hack/version.sh)"
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
export SOURCE_DATE_EPOCH="$epoch"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "budgetguard $version into $out"
rm -rf "$out"
mkdir -p "$out"
"$GO" build -o "$work/release" ./hack/release

VERSION="$version" hack/build-images.sh "$work/images"
mkdir -p "$out/images"
cp "$work/images/scheduler.oci.tar" "$work/images/descheduler.oci.tar" "$out/images/"

ldflags="-s -w -buildid= $(VERSION="$version" hack/ldflags.sh)"
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do
	os="${platform%/*}" arch="${platform#*/}" exe="" ext="tar.gz"
	if [[ "$os" == windows ]]; then exe=".exe" ext="zip"; fi
	echo "building kubectl-budgetguard for $platform"
	bin="$work/kubectl/${os}_$arch/kubectl-budgetguard$exe"
	CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" "$GO" build -trimpath -buildvcs=false -ldflags "$ldflags" \
		-o "$bin" ./cmd/kubectl-budgetguard
	# kubectl_complete-budgetguard, kubectl's completion hook, is a shell
	# script: every archive but windows' holds it.
	completion=("kubectl_complete-budgetguard=cmd/kubectl-budgetguard/kubectl_complete-budgetguard")
	if [[ "$os" == windows ]]; then completion=(); fi
	"$work/release" archive --epoch "$epoch" --out "$out/kubectl-budgetguard_${os}_$arch.$ext" \
		"kubectl-budgetguard$exe=$bin" "LICENSE=LICENSE" "${completion[@]}"
done
"$work/release" krew --version "$version" --out "$out/budgetguard.yaml" manifests/krew/budgetguard.yaml \
	"$out"/kubectl-budgetguard_*

VERSION="$version" hack/chart.sh "$out" "$work/chart" >/dev/null
mkdir -p "$out/manifests"
for d in scheduler descheduler descheduler-cronjob; do
	cp -r "manifests/$d" "$out/manifests/"
done
cp -r manifests/crds "$out/manifests/crds"
rm -f "$out"/manifests/*/*.go
hack/update-manifests.sh "$out/manifests" "$work/chart/budgetguard"

# One version everywhere: the plugin's --version (the binary for this
# machine) and every image the rendered manifests pull.
native="$work/kubectl/$("$GO" env GOHOSTOS)_$("$GO" env GOHOSTARCH)/kubectl-budgetguard"
if [[ -x "$native" ]] && ! "$native" --version | grep -qF "budgetguard $version "; then
	echo "kubectl-budgetguard --version: $("$native" --version); want $version" >&2
	exit 1
fi
if grep -rhoE 'image: \S+' "$out/manifests" | grep -vE ":$version\$"; then
	echo "the rendered manifests above pull another version than $version" >&2
	exit 1
fi

(cd "$out" && "$work/release" checksums --out checksums.txt \
	kubectl-budgetguard_* "budgetguard-${version#v}.tgz" budgetguard.yaml images/*.oci.tar)
echo "released budgetguard $version:"
cat "$out/checksums.txt"

#!/usr/bin/env bash
# Builds the OCI image archives of the scheduler and the descheduler into
# _output/images (or the directory given as $1), for linux/amd64 and
# linux/arm64, without a container daemon and without pulling a base image:
# static binaries (CGO_ENABLED=0, -trimpath) packed on an empty base by
# hack/tools/imagebuild, every timestamp the commit's time (SOURCE_DATE_EPOCH
# overrides it), so that the same commit gives the same digests. Then it
# checks each archive (entrypoint, user, labels, platforms) with
# hack/tools/imagebuild's TestBuiltImages.
#
# -trimpath is right here and only here: the sandbox binary must not have it
# (its in-process kube-apiserver finds fixtures through runtime.Caller), but
# the images hold only the scheduler and the descheduler.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
out="$(realpath -m "${1:-_output/images}")"
version="${VERSION:-$(hack/version.sh)}"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
ldflags="-s -w -buildid= $(VERSION="$version" hack/ldflags.sh)"

for arch in amd64 arm64; do
	echo "building linux/$arch binaries"
	CGO_ENABLED=0 GOOS=linux GOARCH="$arch" "$GO" build -trimpath -buildvcs=false -ldflags "$ldflags" \
		-o "$out/bin/linux_$arch/" ./cmd/scheduler ./cmd/descheduler
done

cd hack/tools
"$GO" run ./imagebuild --bin-dir "$out/bin" --out "$out" --version "$version" --revision "$revision" \
	--epoch "$epoch" scheduler descheduler
IMAGES_DIR="$out" IMAGES_VERSION="$version" IMAGES_REVISION="$revision" \
	"$GO" test -count=1 ./imagebuild

#!/usr/bin/env bash
# Build Thanos (the horizontally scalable store: Receive with a hashring, Query, Ruler) from the Go
# module proxy, cached by version: a repeat run with the same version does not rebuild.
#   collector/store/build-thanos.sh   -> prints the path of the binary
# Thanos' go.mod carries replace directives, so `go install module@version` refuses it: the module
# is downloaded (GOMODCACHE) and ./cmd/thanos built inside a copy of it with -mod=mod.
# Built as Thanos releases are (.promu.yml): tags netgo,slicelabels -- without slicelabels the
# Prometheus label layout differs from the one Thanos' zero-copy gRPC codecs assume, and Query and
# Receive panic on the first StoreAPI call.
# v0.42.4: the newest release whose go.mod accepts Go 1.26.8 (v0.42.5 requires go >= 1.26.10).
# Caches: $OTEL_LIVENESS_CACHE (default ~/.cache/otel-liveness) for the binary; Go's module and build
# caches (GOMODCACHE, GOCACHE) persist between runs on a machine.
set -euo pipefail
version="${THANOS_VERSION:-v0.42.4}"
cache="${OTEL_LIVENESS_CACHE:-$HOME/.cache/otel-liveness}"
# Keyed by version and by this script (a changed recipe rebuilds).
key="$(sha256sum "$0" | cut -c1-12)"
out="$cache/thanos/$version-$key"
bin="$out/thanos"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || { echo "go is required to build Thanos (Go 1.26 or newer)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
echo "building Thanos $version (a cold build takes many minutes; cached afterwards)" >&2
start=$(date +%s)
dir="$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "github.com/thanos-io/thanos@$version" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -d "$dir" ] || { echo "could not download github.com/thanos-io/thanos@$version" >&2; exit 1; }
cp -r "$dir" "$tmp/src"
chmod -R u+w "$tmp/src"
(cd "$tmp/src" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
  nice -n 10 go build -trimpath -tags netgo,slicelabels -ldflags "-s -w -X github.com/prometheus/common/version.Version=${version#v}" \
  -o "$tmp/thanos" ./cmd/thanos) >&2
mkdir -p "$out"
cp "$tmp/thanos" "$bin.partial"
mv "$bin.partial" "$bin"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$bin"

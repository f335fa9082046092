#!/usr/bin/env bash
# Build the collector distribution described by manifest.yaml with the collector builder (ocb),
# cached by the manifest's hash: a repeat run with the same manifest does not rebuild.
#   collector/build.sh            -> prints the path of the binary
# Caches: $OTEL_LIVENESS_CACHE (default ~/.cache/otel-liveness) for binaries, and Go's own
# module and build caches (GOMODCACHE, GOCACHE), which persist between runs on a machine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${OTEL_LIVENESS_CACHE:-$HOME/.cache/otel-liveness}"
key="$(sha256sum "$here/manifest.yaml" | cut -c1-16)"
out="$cache/collector/$key"
bin="$out/otelcol-liveness"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
ocb_version="$(sed -n 's/^  version: *//p' "$here/manifest.yaml" | head -n1)"
gobin="$(go env GOPATH)/bin"
builder="$gobin/builder"
if ! "$builder" version 2>/dev/null | grep -q "$ocb_version"; then
  echo "installing the collector builder v$ocb_version" >&2
  GOFLAGS=-mod=mod go install "go.opentelemetry.io/collector/cmd/builder@v$ocb_version" >&2
fi
mkdir -p "$out"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
sed "s#output_path: .*#output_path: $tmp/dist#" "$here/manifest.yaml" > "$tmp/manifest.yaml"
echo "building the collector (cold builds take several minutes; cached afterwards)" >&2
start=$(date +%s)
"$builder" --config "$tmp/manifest.yaml" >&2
cp "$tmp/dist/otelcol-liveness" "$bin.partial"
mv "$bin.partial" "$bin"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$bin"

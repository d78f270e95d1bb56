#!/usr/bin/env bash
# Fetches ONNX Runtime's C headers for the plugin execution provider (liboctet_ep.so,
# docs/ort-ep.md): Debian sid's libonnxruntime-dev, downloaded with apt from a sources
# list and state folder of its own (nothing from sid is installed into the system) and
# unpacked with dpkg-deb into build/ort-headers/. Any version >= 1.23 (the plugin EP ABI
# with GetCapability / Compile) is accepted; the one used is written to
# build/ort-headers/VERSION.
#
# Idempotent: headers already unpacked are kept. Exits 1 with one `fetch_ort_headers:
# error: ...` line when the package cannot be had (no network, no such package, too old):
# the rest of octet builds without it and the EP tests skip, saying why.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DEST=build/ort-headers
MIN_VERSION=1.23
fail() {
  echo "fetch_ort_headers: error: $*" >&2
  exit 1
}

if [ -f "$DEST/VERSION" ] && [ -f "$DEST/include/onnxruntime/onnxruntime_ep_c_api.h" ]; then
  echo "fetch_ort_headers: have libonnxruntime-dev $(cat "$DEST/VERSION") in $DEST"
  exit 0
fi
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
  fail "apt-get and dpkg-deb are needed (a Debian system)"

APT_DIR="$PWD/$DEST/apt"
rm -rf "$DEST"
mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$APT_DIR/download"
cat >"$APT_DIR/sid.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
# Only this list, only this state: the system's sources and package lists stay as they are.
APT_OPTS=(-o "Dir::Etc::sourcelist=$APT_DIR/sid.sources" -o "Dir::Etc::sourceparts=-"
  -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache=$APT_DIR/cache"
  -o "APT::Get::List-Cleanup=0" -o "Acquire::Languages=none"
  -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::CNF::DefaultEnabled=false")

echo "fetch_ort_headers: reading Debian sid's package list (separate apt state in $APT_DIR)"
apt-get "${APT_OPTS[@]}" -q update >"$APT_DIR/update.log" 2>&1 ||
  fail "apt-get update for Debian sid failed (no network?): $(tail -n 1 "$APT_DIR/update.log")"
# apt-get update exits 0 when a source cannot be reached; the list is then missing.
ls "$APT_DIR"/lists/*_sid_main_*Packages* >/dev/null 2>&1 ||
  fail "could not read Debian sid's package list (no network?): $(grep -m 1 -E '^(W|E|Err)' "$APT_DIR/update.log" || tail -n 1 "$APT_DIR/update.log")"
version=$( (apt-cache "${APT_OPTS[@]}" show libonnxruntime-dev 2>/dev/null || true) |
  sed -n 's/^Version: //p' | head -n 1)
[ -n "$version" ] || fail "Debian sid has no package libonnxruntime-dev"
dpkg --compare-versions "$version" ge "$MIN_VERSION" ||
  fail "Debian sid's libonnxruntime-dev is $version; the plugin EP needs >= $MIN_VERSION"
(cd "$APT_DIR/download" && apt-get "${APT_OPTS[@]}" -q download "libonnxruntime-dev=$version") \
  >"$APT_DIR/download.log" 2>&1 ||
  fail "apt-get download libonnxruntime-dev=$version failed: $(tail -n 1 "$APT_DIR/download.log")"
deb=$(ls "$APT_DIR"/download/libonnxruntime-dev_*.deb)
dpkg-deb -x "$deb" "$APT_DIR/extract"
mkdir -p "$DEST/include"
cp -r "$APT_DIR/extract/usr/include/onnxruntime" "$DEST/include/"
[ -f "$DEST/include/onnxruntime/onnxruntime_ep_c_api.h" ] ||
  fail "libonnxruntime-dev $version has no onnxruntime_ep_c_api.h"
rm -rf "$APT_DIR/extract" "$APT_DIR/cache" "$APT_DIR/lists"
echo "$version" >"$DEST/VERSION"
echo "fetch_ort_headers: libonnxruntime-dev $version unpacked into $DEST/include/onnxruntime"

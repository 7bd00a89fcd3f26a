#!/usr/bin/env bash
# Makes sure a mediasoup-worker binary exists, building one from Debian's packages when none does.
#
# Looks, in this order, at $MEDIASOUP_WORKER_BIN, upstream's prebuilt location inside node_modules, and the cache
# ${MEDIASOUP_WORKER_CACHE:-$HOME/.cache/registry-mediasoup}/<mediasoup version>/mediasoup-worker (the same order
# media/worker-binary.ts resolves at run time). If none runs, it builds the worker from node_modules/mediasoup/worker
# against Debian's libraries (meson subproject shims from media/worker-build/ instead of upstream's downloads) in a
# temporary copy, and stores the binary in that cache. node_modules is only read.
#
# Usage: scripts/build-mediasoup-worker.sh [--install-deps] [--force]
#   --install-deps  apt-get install the Debian packages even when a worker exists (CI: the binary links them)
#   --force         rebuild into the cache even if a worker exists (a changed recipe rebuilds by itself)
# Needs `npm ci` first. The Debian packages are installed when missing if running as root; otherwise it stops and
# prints the apt-get command.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Build and link dependencies. The built binary links libuv1, libssl3, libsrtp2-1 and libabsl at run time.
packages=(build-essential pkg-config meson ninja-build python3 libssl-dev libuv1-dev libsrtp2-dev libabsl-dev
  flatbuffers-compiler libflatbuffers-dev)

install_deps=false
force=false
for arg in "$@"; do
  case "$arg" in
    --install-deps) install_deps=true ;;
    --force) force=true ;;
    *) echo "unknown argument: $arg (expected --install-deps or --force)" >&2; exit 2 ;;
  esac
done

log() { echo "[mediasoup-worker] $*"; }

ensure_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "missing Debian packages; install them with: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine may have no package lists yet: update only when the first attempt fails.
  apt-get install -y --no-install-recommends "${missing[@]}" ||
    { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; }
}

# mediasoup-worker exits with 41 when started without MEDIASOUP_VERSION (upstream's own check of a prebuilt binary);
# anything else means it cannot run here, e.g. a shared library is missing.
runs() {
  local status=0
  [ -x "$1" ] || return 1
  env -i "$1" >/dev/null 2>&1 || status=$?
  [ "$status" -eq 41 ]
}

mediasoup_dir=$root/node_modules/mediasoup
if [ ! -f "$mediasoup_dir/package.json" ]; then
  log "node_modules/mediasoup is missing: run npm ci first" >&2
  exit 1
fi
version=$(node -p "require('$mediasoup_dir/package.json').version")
cache_dir=${MEDIASOUP_WORKER_CACHE:-$HOME/.cache/registry-mediasoup}/$version
cached=$cache_dir/mediasoup-worker
# The recipe (this script and the shims) is part of the cache key: a cached binary built by an older recipe is rebuilt.
recipe=$(cat "$root/scripts/build-mediasoup-worker.sh" $(find "$root/media/worker-build" -type f | LC_ALL=C sort) | sha256sum | cut -c1-16)

$install_deps && ensure_packages

if ! $force; then
  # An explicit binary is the only candidate: the server would use it and nothing else.
  if [ -n "${MEDIASOUP_WORKER_BIN:-}" ]; then
    runs "$MEDIASOUP_WORKER_BIN" && { log "using MEDIASOUP_WORKER_BIN=$MEDIASOUP_WORKER_BIN"; exit 0; }
    log "MEDIASOUP_WORKER_BIN=$MEDIASOUP_WORKER_BIN does not run; fix or unset it" >&2
    exit 1
  fi
  upstream=$mediasoup_dir/worker/out/Release/mediasoup-worker
  runs "$upstream" && { log "using $upstream"; exit 0; }
  if runs "$cached" && [ "$(cat "$cached.recipe" 2>/dev/null)" = "$recipe" ]; then
    log "using $cached"
    exit 0
  fi
fi

ensure_packages
started=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/mediasoup-worker-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building mediasoup-worker $version in $work"
cp -R "$mediasoup_dir/worker" "$work/worker"
src=$work/worker

# Each upstream subproject wrap gets the Debian-backed shim of the same name, placed in the directory the wrap
# names: meson then uses it as-is and never downloads.
for shim in "$root"/media/worker-build/subprojects/*/; do
  name=$(basename "$shim")
  wrap=$src/subprojects/$name.wrap
  dir=$(sed -n 's/^directory *= *//p' "$wrap" 2>/dev/null || true)
  if [ -z "$dir" ]; then
    log "no subprojects/$name.wrap with a directory line in mediasoup $version: update media/worker-build/" >&2
    exit 1
  fi
  cp -R "$shim" "$src/subprojects/$dir"
done

# replace_text FILE OLD NEW: replace a literal line fragment, failing loudly if upstream changed it.
replace_text() {
  grep -qF -- "$2" "$src/$1" || { log "expected text not found in $1: $2" >&2; exit 1; }
  OLD=$2 NEW=$3 perl -0pi -e 's/\Q$ENV{OLD}\E/$ENV{NEW}/g' "$src/$1"
}
# Debian 12 ships meson 1.0.1, which builds this tree fine.
replace_text meson.build "meson_version: '>= 1.1.0'" "meson_version: '>= 1.0.0'"
# Debian's OpenSSL has kTLS: with `==`, the BIO callback answers 1 to libssl's kTLS control query (a call flagged
# BIO_CB_RETURN | BIO_CB_CTRL), libssl then skips its write buffer and SSL_read crashes on the first ClientHello.
replace_text src/RTC/DtlsTransport.cpp "(operationType == BIO_CB_RETURN) ?" "(operationType & BIO_CB_RETURN) ?"

meson setup --wrap-mode=nodownload --buildtype=release -Db_ndebug=true -Db_pie=true -Db_staticpic=true \
  "$work/out" "$src"
ninja -C "$work/out" mediasoup-worker

if ! runs "$work/out/mediasoup-worker"; then
  log "the built binary does not start" >&2
  exit 1
fi
mkdir -p "$cache_dir"
# Copy then rename, so a concurrent reader never sees half a binary.
cp "$work/out/mediasoup-worker" "$cached.tmp.$$"
mv -f "$cached.tmp.$$" "$cached"
echo "$recipe" > "$cached.recipe"
log "built in $((SECONDS - started)) s: $cached"

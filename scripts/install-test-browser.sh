#!/usr/bin/env bash
# Makes sure the browser of the media end-to-end tests exists: Debian's Chromium at /usr/bin/chromium, driven by npm
# playwright-core (test/support/chromium.ts). Playwright's own browser downloads cannot reach their hosts here, and
# Debian's build comes with the codecs and the fake capture devices the tests use.
#
# Usage: scripts/install-test-browser.sh   (idempotent: does nothing when /usr/bin/chromium exists)
# Installs the Debian package when missing if running as root; otherwise it stops and prints the apt-get command.
set -euo pipefail

browser=/usr/bin/chromium
log() { echo "[test-browser] $*"; }

[ -x "$browser" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  log "$browser is missing; install it with: sudo apt-get install -y chromium" >&2
  exit 1
fi
log "installing Debian's chromium"
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists yet: update only when the first attempt fails.
apt-get install -y -qq chromium >/dev/null ||
  { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
[ -x "$browser" ] || { log "apt-get installed chromium but $browser is missing" >&2; exit 1; }

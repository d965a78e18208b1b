#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium, for engine/cli/tests/report_html.rs (report.html
# loaded in a real browser). Fails loudly when it cannot find or fetch one: CI must not skip it.
#
# In order: $AORTA_CHROMIUM; a chromium already installed (PATH); Debian's chromium package and
# the libraries it needs that this machine lacks (the first alternative of each Depends, followed
# recursively) unpacked into .cache/chromium/ with `apt-get download` and `dpkg-deb -x` (no
# installation, no root once the apt lists exist), started through a wrapper that sets
# LD_LIBRARY_PATH. AORTA_CHROMIUM_FROM_DEBIAN=1 skips an installed chromium.
set -euo pipefail
cd "$(dirname "$0")/.."

works() { "$1" --headless --no-sandbox --disable-gpu --version >/dev/null 2>&1; }

if [ -n "${AORTA_CHROMIUM:-}" ]; then
  works "$AORTA_CHROMIUM" || { echo "error: AORTA_CHROMIUM=$AORTA_CHROMIUM does not run" >&2; exit 1; }
  echo "$AORTA_CHROMIUM"
  exit 0
fi

if [ "${AORTA_CHROMIUM_FROM_DEBIAN:-0}" != 1 ]; then
  for p in "$(command -v chromium 2>/dev/null || true)" "$(command -v chromium-browser 2>/dev/null || true)"; do
    if [ -n "$p" ] && works "$p"; then
      echo "$p"
      exit 0
    fi
  done
fi

cache="$PWD/.cache/chromium"
entry="$cache/chromium"
if [ -x "$entry" ] && works "$entry"; then
  echo "$entry"
  exit 0
fi

. tests/lib/deb-fetch.sh
deb_require_tools "no chromium, and no apt-get/dpkg-deb to fetch Debian's;
       install chromium or point AORTA_CHROMIUM at one."
deb_prepare "$cache" chromium

# chromium and what it needs that is not installed: the first alternative of every Depends
# and Pre-Depends, recursively.
declare -A seen
queue=(chromium chromium-common)
pkgs=()
while [ ${#queue[@]} -gt 0 ]; do
  p=${queue[0]}
  queue=("${queue[@]:1}")
  [ -n "${seen[$p]:-}" ] && continue
  seen[$p]=1
  [ -z "$(deb_missing "$p")" ] && continue
  pkgs+=("$p")
  for d in $(apt-cache "${apt_opts[@]}" show --no-all-versions "$p" 2>/dev/null \
      | awk -F': ' '/^(Pre-)?Depends:/ {print $2}' | tr ',' '\n' \
      | sed 's/|.*//; s/(.*)//; s/:any//; s/ //g'); do
    [ -z "${seen[$d]:-}" ] && queue+=("$d")
  done
done
deb_unpack "${pkgs[@]}"

# Every directory holding a shared library (pulseaudio keeps its own in a subdirectory).
libs=""
for d in $(cd "$cache.tmp/root" && find . -name '*.so*' -type f -printf '%h\n' | sort -u); do
  libs="$libs${libs:+:}"'$here'"/root/${d#./}"
done
printf '#!/bin/sh\nhere=$(cd "$(dirname "$0")" && pwd)\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
  "$libs" '$here/root/usr/lib/chromium/chromium' > "$cache.tmp/chromium"
chmod +x "$cache.tmp/chromium"
mkdir -p "$cache"
rm -rf "$cache/root" "$cache/chromium"
mv "$cache.tmp/root" "$cache/root"
mv "$cache.tmp/chromium" "$cache/chromium"
rm -rf "$cache.tmp"

works "$entry" || { echo "error: Debian's chromium in $cache/root does not run here:" >&2; "$entry" --headless --no-sandbox --version >&2 || true; exit 1; }
echo "$entry"

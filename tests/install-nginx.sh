#!/usr/bin/env bash
# Prints the path of an nginx with its WebDAV module, for engine/cli/tests/remote_cache.rs (the
# two-store remote cache test against a real nginx on loopback). Fails loudly when it cannot
# find or fetch one: CI must not skip that test.
#
# In order: $AORTA_NGINX; an nginx already installed (PATH, /usr/sbin); Debian's nginx package
# unpacked into .cache/nginx/ (`apt-get download`, no installation, no root needed once the apt
# lists exist). Debian builds nginx --with-http_dav_module. Libraries the machine lacks
# (libssl3 on slim images) are fetched the same way and found through a wrapper script.
# AORTA_NGINX_FROM_DEBIAN=1 skips the installed nginx (to exercise the download).
set -euo pipefail
cd "$(dirname "$0")/.."

has_dav() { "$1" -V 2>&1 | grep -q -- --with-http_dav_module; }

if [ -n "${AORTA_NGINX:-}" ]; then
  has_dav "$AORTA_NGINX" || { echo "error: AORTA_NGINX=$AORTA_NGINX is not an nginx with the WebDAV module" >&2; exit 1; }
  echo "$AORTA_NGINX"
  exit 0
fi

if [ "${AORTA_NGINX_FROM_DEBIAN:-0}" != 1 ]; then
  for p in "$(command -v nginx 2>/dev/null || true)" /usr/sbin/nginx /usr/local/sbin/nginx /usr/local/nginx/sbin/nginx; do
    if [ -n "$p" ] && [ -x "$p" ] && has_dav "$p"; then
      echo "$p"
      exit 0
    fi
  done
fi

cache="$PWD/.cache/nginx"
entry="$cache/nginx"   # the binary, or a wrapper that adds the fetched libraries
if [ -x "$entry" ] && has_dav "$entry"; then
  echo "$entry"
  exit 0
fi

. tests/lib/deb-fetch.sh
deb_require_tools "no nginx with the WebDAV module, and no apt-get/dpkg-deb to fetch Debian's;
       install nginx, point AORTA_NGINX at one, or set AORTA_SKIP_NGINX=1 for a local run."
deb_prepare "$cache" nginx
# nginx itself, plus the libraries it links that this machine does not have.
deps=()
for dep in $(apt-cache "${apt_opts[@]}" depends --no-recommends --no-suggests nginx | awk '/Depends:/ {print $2}' | sort -u); do
  case "$dep" in nginx-common|iproute2|"<"*) continue ;; esac
  deps+=("$dep")
done
mapfile -t pkgs < <(deb_missing "${deps[@]}")
deb_unpack nginx "${pkgs[@]}"

bin="$cache/root/usr/sbin/nginx"
libs=""
for d in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib/aarch64-linux-gnu usr/lib/aarch64-linux-gnu; do
  [ -d "$cache.tmp/root/$d" ] && libs="$libs${libs:+:}"'$here'"/root/$d"
done
if [ -n "$libs" ]; then
  printf '#!/bin/sh\nhere=$(cd "$(dirname "$0")" && pwd)\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' "$libs" '$here/root/usr/sbin/nginx' > "$cache.tmp/nginx"
  chmod +x "$cache.tmp/nginx"
else
  ln -s root/usr/sbin/nginx "$cache.tmp/nginx"
fi
# The apt state (non-root runs) stays; the unpacked tree replaces any earlier one.
mkdir -p "$cache"
rm -rf "$cache/root" "$cache/nginx"
mv "$cache.tmp/root" "$cache/root"
mv "$cache.tmp/nginx" "$cache/nginx"
rm -rf "$cache.tmp"

has_dav "$entry" || { echo "error: Debian's nginx in $cache/root does not run here:" >&2; "$entry" -V >&2 || true; exit 1; }
echo "$entry"

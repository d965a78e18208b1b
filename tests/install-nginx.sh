#!/usr/bin/env bash
# Makes sure nginx with its WebDAV module is installed, for engine/cli/tests/remote_cache.rs
# (the two-store remote cache test against a real nginx on loopback). Debian's nginx package is
# built --with-http_dav_module. Fails loudly when it cannot install: CI must not skip the test.
set -euo pipefail

find_nginx() {
  command -v nginx 2>/dev/null && return 0
  for p in /usr/sbin/nginx /usr/local/sbin/nginx /usr/local/nginx/sbin/nginx; do
    [ -x "$p" ] && { echo "$p"; return 0; }
  done
  return 1
}

if ! bin=$(find_nginx); then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo="sudo -n"
    else
      echo "error: nginx is missing and this user cannot install it (not root, no passwordless sudo)." >&2
      echo "       install it (apt-get install nginx), or set AORTA_SKIP_NGINX=1 for a local run." >&2
      exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null; then
    echo "error: nginx is missing and apt-get is unavailable; install nginx with its WebDAV module," >&2
    echo "       or set AORTA_SKIP_NGINX=1 for a local run." >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends nginx >/dev/null
  bin=$(find_nginx) || { echo "error: apt-get installed nginx but no nginx binary was found" >&2; exit 1; }
fi

if ! "$bin" -V 2>&1 | grep -q -- --with-http_dav_module; then
  echo "error: $bin was built without the WebDAV module (http_dav_module)" >&2
  exit 1
fi
echo "$bin"

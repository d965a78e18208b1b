# Fetching Debian packages without installing them, for the tests/install-*.sh scripts: `apt-get
# download` + `dpkg-deb -x` into CACHE.tmp/root (no root needed once the apt lists exist; without
# root, apt's lists and cache live in CACHE/apt). Source it, then:
#
#   deb_require_tools "what is missing; what to do instead"
#   deb_prepare CACHE PKG...   # CACHE.tmp/{debs,root}; apt_opts; apt-get update if PKGs are unknown
#   deb_missing PKG...         # prints those of PKG not installed on this machine
#   deb_unpack PKG...          # downloads PKGs and unpacks them into CACHE.tmp/root
#
# The caller moves CACHE.tmp/root into place and removes CACHE.tmp.

deb_require_tools() {
  if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    echo "error: $1" >&2
    exit 1
  fi
}

deb_prepare() {
  deb_cache=$1
  shift
  rm -rf "$deb_cache.tmp"
  mkdir -p "$deb_cache.tmp/debs" "$deb_cache.tmp/root"
  # apt-get download as root drops to the _apt user, who must be able to write here.
  chmod 0777 "$deb_cache.tmp/debs"
  apt_opts=()
  if [ "$(id -u)" != 0 ]; then
    # Without root, keep apt's lists and cache inside the cache (apt-get update works unprivileged).
    mkdir -p "$deb_cache/apt/lists/partial" "$deb_cache/apt/archives/partial"
    apt_opts=(-o "Dir::State::Lists=$deb_cache/apt/lists" -o "Dir::Cache=$deb_cache/apt" -o "Debug::NoLocking=1")
  fi
  if ! apt-get "${apt_opts[@]}" download --print-uris "$@" >/dev/null 2>&1; then
    apt-get "${apt_opts[@]}" update -qq >&2
  fi
}

deb_missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

deb_unpack() {
  local deb
  (cd "$deb_cache.tmp/debs" && apt-get "${apt_opts[@]}" download -qq "$@" >&2)
  for deb in "$deb_cache.tmp/debs"/*.deb; do
    dpkg-deb -x "$deb" "$deb_cache.tmp/root"
  done
  rm -rf "$deb_cache.tmp/debs"
}

#!/usr/bin/env bash
# Prints the path of a directory holding Slurm's and MUNGE's commands (sbatch, squeue, sacct,
# scancel, scontrol, slurmctld, slurmd, munged, mungekey, ...), for the Slurm executor's tests
# (engine/cli/tests/slurm.rs) and benchmark, which start a one-node cluster on loopback with
# tests/slurm-cluster.sh. Fails loudly when it cannot find or fetch them: CI must not skip.
#
# In order: $AORTA_SLURM_BIN; Debian's packages already installed (/usr/sbin/slurmctld with
# slurmd, sbatch and munged beside it); Debian's slurmctld, slurmd, slurm-client and munge
# unpacked into .cache/slurm/ (`apt-get download`, no installation, no root needed once the apt
# lists exist), with libraries this machine lacks, each command behind a wrapper in
# .cache/slurm/bin that points the loader at the unpacked libraries (Debian links them with a
# RUNPATH under /usr/lib). The plugin directory is printed by tests/slurm-cluster.sh from the
# same tree. AORTA_SLURM_FROM_DEBIAN=1 skips installed packages (to exercise the download).
set -euo pipefail
cd "$(dirname "$0")/.."

cmds=(sbatch squeue sacct scancel scontrol sinfo srun slurmctld slurmd slurmstepd munged mungekey)
complete() { # complete DIR: every command is there
  for c in "${cmds[@]}"; do [ -x "$1/$c" ] || return 1; done
}

if [ -n "${AORTA_SLURM_BIN:-}" ]; then
  complete "$AORTA_SLURM_BIN" || { echo "error: AORTA_SLURM_BIN=$AORTA_SLURM_BIN lacks one of: ${cmds[*]}" >&2; exit 1; }
  echo "$AORTA_SLURM_BIN"
  exit 0
fi

cache="$PWD/.cache/slurm"
if [ "${AORTA_SLURM_FROM_DEBIAN:-0}" != 1 ] && [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] \
  && [ -x /usr/bin/sbatch ] && [ -x /usr/sbin/munged ]; then
  # Installed packages: one directory of links, so callers put a single folder on PATH.
  mkdir -p "$cache/system-bin"
  for c in "${cmds[@]}"; do
    for d in /usr/bin /usr/sbin; do [ -x "$d/$c" ] && ln -sfn "$d/$c" "$cache/system-bin/$c" && break; done
  done
  plugins=$(ls -d /usr/lib/*-linux-gnu/slurm-wlm 2>/dev/null | head -n 1)
  [ -n "$plugins" ] && ln -sfn "$plugins" "$cache/system-bin/.plugins"
  complete "$cache/system-bin" && { echo "$cache/system-bin"; exit 0; }
fi

entry="$cache/bin"
if complete "$entry" && "$entry/slurmd" -V >/dev/null 2>&1 && "$entry/munged" --version >/dev/null 2>&1; then
  echo "$entry"
  exit 0
fi

. tests/lib/deb-fetch.sh
deb_require_tools "no Slurm, and no apt-get/dpkg-deb to fetch Debian's; install slurmctld, slurmd,
       slurm-client and munge, or point AORTA_SLURM_BIN at a folder of their commands."
top=(slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins libmunge2)
deb_prepare "$cache" "${top[@]}"
# The packages, plus the libraries they link that this machine does not have (one level is
# enough: the libraries' own dependencies are base packages).
deps=()
for dep in $(apt-cache "${apt_opts[@]}" depends --no-recommends --no-suggests "${top[@]}" | awk '/Depends:/ {print $2}' | sort -u); do
  case "$dep" in "<"*|adduser|lsb-base|ucf|libc6|libpam0g|slurm-*|munge|libmunge2) continue ;; esac
  deps+=("$dep")
done
mapfile -t pkgs < <(deb_missing "${deps[@]}")
deb_unpack "${top[@]}" "${pkgs[@]}"

# Wrappers: the unpacked libslurmfull.so (RUNPATH /usr/lib/<arch>/slurm-wlm) and libraries.
arch_dir=$(cd "$cache.tmp/root/usr/lib" && ls -d ./*-linux-gnu | head -n 1)
arch_dir=${arch_dir#./}
libs='$here/root/usr/lib/'"$arch_dir/slurm-wlm:"'$here/root/usr/lib/'"$arch_dir"
[ -d "$cache.tmp/root/lib/$arch_dir" ] && libs="$libs:"'$here/root/lib/'"$arch_dir"
mkdir -p "$cache.tmp/bin"
for c in "${cmds[@]}"; do
  target=""
  # Debian ships the daemons as slurmctld-wlm/slurmd-wlm behind update-alternatives.
  # Slurm decides what it is from its program name (run_in_daemon("slurmctld,slurmd") keeps
  # a node's Gres only in a daemon named so), hence links with the alternatives' names.
  for p in "usr/bin/$c" "usr/sbin/$c"; do
    [ -x "$cache.tmp/root/$p" ] && target='$here/root/'"$p" && break
  done
  if [ -z "$target" ] && [ -x "$cache.tmp/root/usr/sbin/$c-wlm" ]; then
    ln -s "$c-wlm" "$cache.tmp/root/usr/sbin/$c"
    target='$here/root/usr/sbin/'"$c"
  fi
  [ -n "$target" ] || { echo "error: Debian's packages did not hold $c" >&2; exit 1; }
  printf '#!/bin/sh\nhere=$(cd "$(dirname "$0")/.." && pwd)\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' "$libs" "$target" > "$cache.tmp/bin/$c"
  chmod +x "$cache.tmp/bin/$c"
done
# tests/slurm-cluster.sh passes this folder's slurmstepd to slurmd (`slurmd -d`) and .plugins
# as slurm.conf's PluginDir.
ln -s "../root/usr/lib/$arch_dir/slurm-wlm" "$cache.tmp/bin/.plugins"

mkdir -p "$cache"
rm -rf "$cache/root" "$cache/bin"
mv "$cache.tmp/root" "$cache/root"
mv "$cache.tmp/bin" "$cache/bin"
rm -rf "$cache.tmp"

"$entry/slurmd" -V >/dev/null 2>&1 && "$entry/munged" --version >/dev/null 2>&1 || { echo "error: Debian's Slurm in $cache/root does not run here:" >&2; "$entry/slurmd" -V >&2 || true; exit 1; }
echo "$entry"

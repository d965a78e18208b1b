# Sourced by the device scripts (needs $PY, a Python whose site-packages may hold nvidia-* wheels).
# Puts NVRTC (no newer than the driver's CUDA, 13.0 on the H200) and cuBLASLt on LD_LIBRARY_PATH:
# the toolkit's lib64 first, then the nvidia-* wheels next to torch. libcuda.so.1 comes from the
# driver's own path. Leaves SITE set to that Python's site-packages.
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
libdirs=""
for lib in libnvrtc.so libcublasLt.so; do
  f=$(ls /usr/local/cuda/lib64/$lib.1[0-9]* /usr/local/cuda-13*/lib64/$lib.1[0-9]* \
         /usr/local/cuda/targets/*/lib/$lib.1[0-9]* \
         "$SITE"/nvidia/cu13/lib/$lib.1[0-9]* "$SITE"/nvidia/*/lib/$lib.1[0-9]* 2>/dev/null | head -1)
  [ -n "$f" ] && libdirs="$libdirs:$(dirname "$f")"
done
export LD_LIBRARY_PATH="${libdirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

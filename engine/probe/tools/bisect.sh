#!/bin/bash
# Which torch getters initialise CUDA? (device-side check for the embedded probe script)
PY=${PY:-/opt/torch/.venv/bin/python3}
for e in "None" "torch.backends.cudnn.version()" "torch.backends.cudnn.is_available()" "torch._C._cudnn.getCompileVersion()" \
  "torch.cuda.nccl.version()" "torch.distributed.is_nccl_available()" "torch.backends.cuda.flash_sdp_enabled()" \
  "torch.backends.cuda.matmul.allow_tf32" "torch.backends.cudnn.allow_tf32" "torch.get_float32_matmul_precision()" \
  "torch.backends.cuda.preferred_blas_library()" "torch._C._cuda_getAllocatorBackend()" "torch._C._cuda_getArchFlags()" \
  "torch.__config__.show()[:10]" "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction" \
  "torch.are_deterministic_algorithms_enabled()" "torch.backends.cudnn.benchmark"; do
  "$PY" - "$e" <<'PYEOF'
import sys, time
t=time.time()
import torch
t1=time.time()
e=sys.argv[1]
try:
    v=eval(e)
except Exception as x:
    v="ERR %r"%x
t2=time.time()
maps=open("/proc/self/maps").read()
print("%-70s init=%s libcuda=%s import=%.2fs call=%.3fs v=%r"%(e, torch.cuda.is_initialized(), "libcuda.so" in maps, t1-t, t2-t1, str(v)[:40]))
PYEOF
done
"$PY" -X importtime -c 'import torch' 2>/tmp/it.txt; sort -t'|' -k2 -n -r /tmp/it.txt | head -25
for i in 1 2 3; do s=$(date +%s%N); "$PY" -c 'import torch'; echo "import torch $(( ($(date +%s%N)-s)/1000000 ))ms"; done
s=$(date +%s%N); "$PY" -c 'import importlib.metadata as m; list(m.distributions())'; echo "dists $(( ($(date +%s%N)-s)/1000000 ))ms"

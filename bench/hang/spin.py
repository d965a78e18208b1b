# A real spinning CUDA hang: a kernel that runs for minutes (torch.cuda._sleep spins on the
# GPU clock), waited on with CUDA's default synchronize, which spins on the CPU too.
import time, torch
print("spin: launching", flush=True)
t0 = time.time()
torch.cuda._sleep(int(2e12))
torch.cuda.synchronize()
print(f"spin: done after {time.time() - t0:.1f} s", flush=True)

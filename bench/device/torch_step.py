# A small CUDA PyTorch job for the torch_profiler collector: matmuls, softmax, a reduction.
import torch

x = torch.randn(2048, 2048, device="cuda")
for _ in range(20):
    y = torch.softmax(x @ x, dim=-1)
torch.cuda.synchronize()
print("ok", float(y.sum()))

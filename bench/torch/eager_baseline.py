#!/usr/bin/env python3
"""PyTorch eager twin of aorta's torch workloads (workloads/torch), for side-by-side ratios.

Same models as workloads/torch/src/model.rs (learned positions, pre-LayerNorm blocks with one
qkv Linear, causal SDPA, GELU FFN, final LayerNorm, vocab head), same AdamW + linear warmup,
same synthetic tokens, same greedy decode with a preallocated KV cache. Prints one JSON object.

  eager_baseline.py training  --hidden 2048 --layers 24 --heads 16 --ffn 5632 --seq 512 --batch 1
  eager_baseline.py inference --hidden 512 --layers 4 --heads 8 --prompt-len 128 --gen 32 --batch 8
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class Block(nn.Module):
    def __init__(self, h, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1, self.qkv, self.out = nn.LayerNorm(h), nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.ln2, self.up, self.down = nn.LayerNorm(h), nn.Linear(h, ffn), nn.Linear(ffn, h)

    def forward(self, x, cache=None, pos=0):
        b, t, h = x.shape
        nh, dh = self.heads, h // self.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, nh, dh).permute(2, 0, 3, 1, 4)
        if cache is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            kc, vc = cache
            kc[:, :, pos:pos + t] = k
            vc[:, :, pos:pos + t] = v
            if t > 1:  # prefill from position 0
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                a = F.scaled_dot_product_attention(q, kc[:, :, :pos + 1], vc[:, :, :pos + 1])
        x = x + self.out(a.transpose(1, 2).reshape(b, t, h))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Model(nn.Module):
    def __init__(self, a, max_seq):
        super().__init__()
        self.embed, self.pos = nn.Embedding(a.vocab, a.hidden), nn.Embedding(max_seq, a.hidden)
        self.blocks = nn.ModuleList(Block(a.hidden, a.heads, a.ffn) for _ in range(a.layers))
        self.ln_f, self.head = nn.LayerNorm(a.hidden), nn.Linear(a.hidden, a.vocab)

    def forward(self, tokens, caches=None, pos=0):
        t = tokens.shape[1]
        x = self.embed(tokens) + self.pos(torch.arange(pos, pos + t, device=tokens.device))
        for i, blk in enumerate(self.blocks):
            x = blk(x, None if caches is None else caches[i], pos)
        return self.head(self.ln_f(x))


def percentile(xs, p):
    v = sorted(xs)
    if not v:
        return None
    k = (p / 100) * (len(v) - 1)
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def training(a, dev, dtype):
    torch.manual_seed(a.seed)
    model = Model(a, a.seq).to(dev, dtype)
    # Default: PyTorch's multi-tensor (foreach) AdamW; --fused: AdamW(fused=True) and
    # zero_grad(set_to_none=True), eager's fastest step and what aorta's workload does.
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01,
                            fused=True if a.fused else None)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / a.warmup) if a.warmup else 1.0)
    torch.manual_seed(a.seed + 7919)
    times, loss = [], None
    for _ in range(a.steps):
        t = torch.randint(a.vocab, (a.batch, a.seq + 1)).to(dev)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=a.fused)
        logits = model(t[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, a.vocab), t[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        sched.step()
        sync(dev)
        times.append((time.perf_counter() - t0) * 1e3)
    timed = times[a.warmup:] or times
    mean_s = sum(timed) / len(timed) / 1e3
    return {"final_loss": loss.item(), "step_times_ms": times, "step_time_p50": percentile(timed, 50),
            "step_time_p99": percentile(timed, 99), "tokens_per_sec": a.batch * a.seq / mean_s}


@torch.inference_mode()
def inference(a, dev, dtype):
    torch.manual_seed(a.seed)
    cap = a.prompt_len + a.gen
    model = Model(a, cap).to(dev, dtype).eval()
    prompt = torch.randint(a.vocab, (a.batch, a.prompt_len)).to(dev)
    dh = a.hidden // a.heads
    prefill, decode, steps = [], [], []
    for step in range(a.warmup + a.steps):
        caches = [(torch.zeros(a.batch, a.heads, cap, dh, device=dev, dtype=dtype),
                   torch.zeros(a.batch, a.heads, cap, dh, device=dev, dtype=dtype)) for _ in range(a.layers)]
        s0 = time.perf_counter()
        t0 = time.perf_counter()
        logits = model(prompt, caches, 0)[:, -1]
        sync(dev)
        p_ms, d_ms = (time.perf_counter() - t0) * 1e3, []
        for pos in range(a.prompt_len, a.prompt_len + a.gen - 1):
            nxt = logits.argmax(-1, keepdim=True)
            t0 = time.perf_counter()
            logits = model(nxt, caches, pos)[:, -1]
            sync(dev)
            d_ms.append((time.perf_counter() - t0) * 1e3)
        if step >= a.warmup:
            prefill.append(p_ms)
            decode += d_ms
            steps.append((time.perf_counter() - s0) * 1e3)
    decoded = a.batch * (a.gen - 1) * a.steps
    return {"prefill_latency_ms": sum(prefill) / len(prefill), "decode_latency_ms": sum(decode) / max(1, len(decode)),
            "tokens_per_sec": decoded / (sum(decode) / 1e3) if decode else None, "decoded_tokens": decoded,
            "step_times_ms": steps, "step_time_p50": percentile(steps, 50), "step_time_p99": percentile(steps, 99)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", choices=["training", "inference"])
    for k, d in [("hidden", 256), ("layers", 2), ("heads", 4), ("ffn", 1024), ("vocab", 32000), ("seq", 128),
                 ("batch", 2), ("steps", 50), ("warmup", 1), ("prompt-len", 128), ("gen", 32), ("seed", 1234)]:
        p.add_argument(f"--{k}", type=int, default=d)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--fused", action="store_true", help="AdamW(fused=True) and zero_grad(set_to_none=True)")
    p.add_argument("--dtype", choices=DTYPES, default="bf16")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    dev, dtype = torch.device(a.device), DTYPES[a.dtype]
    torch.backends.cuda.matmul.allow_tf32 = False
    r = training(a, dev, dtype) if a.workload == "training" else inference(a, dev, dtype)
    r.update({"impl": "pytorch-eager", "workload": a.workload, "device": str(dev), "torch": torch.__version__,
              "dtype": a.dtype, "config": {k: v for k, v in vars(a).items() if k not in ("workload",)}})
    print(json.dumps(r))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch half of the GPT-2-small training-step comparison (brigade's half: bench/gpt2_step_bench.cpp).

The same model as brigade's nn/gpt.h in plain PyTorch (bench/torch_gpt.py), no dropout, GPT-2 initialisation.
The step is brigade's: zero_grad, forward, mean cross-entropy, backward, clip the global gradient norm to
1.0, AdamW (lr 6e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on >= 2-d parameters, PyTorch's default
implementation). Inputs are fixed random token ids.

Precision: --dtype fp32 runs in true fp32 (TF32 matmuls are switched off, as brigade's fp32 does not use
them; --tf32 turns them on for reference); --dtype bf16 wraps forward and loss in torch.autocast(bfloat16),
the usual mixed-precision recipe (fp32 master weights, bf16 GEMMs, fp32 softmax/norm/loss).
Attention: --attention auto uses F.scaled_dot_product_attention (fused/flash kernels) where PyTorch has it
(>= 2.0) and the eager formula (matmul, masked_fill, softmax, matmul) otherwise; --compile (off by default)
applies torch.compile where it exists.

FLOPs per step and MFU: the same formula as the C++ side, 6 N tokens + 12 L C T tokens (N every parameter,
tied embedding once), MFU against 989 TFLOP/s (bf16) or 67 TFLOP/s (fp32) on CUDA (H200), --peak-tflops to
override; no MFU on the CPU unless given.

It times each of --steps steps alone (after --warmup untimed ones), synchronising the device at the end of
each, and prints one line of key=value pairs with the keys gpt2_step_bench prints (plus attention and
compile); --json FILE writes them too. Uses only APIs PyTorch 1.13 has (newer ones are probed first).

  python3 bench/gpt2_step_torch.py --device cuda --dtype bf16
  /usr/bin/python3 bench/gpt2_step_torch.py --device cpu --layers 2 --block 64 --batch 2 --vocab 512 \\
      --steps 3 --warmup 1
"""

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from torch_gpt import GPT, has_sdpa


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    ap.add_argument("--attention", choices=["auto", "sdpa", "eager"], default="auto")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch >= 2.0)")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 matmuls in fp32 (off by default)")
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
    if a.attention == "sdpa" and not has_sdpa():
        sys.exit("--attention sdpa needs PyTorch >= 2.0 (this is %s)" % torch.__version__)
    fused = a.attention == "sdpa" or (a.attention == "auto" and has_sdpa())

    torch.manual_seed(1337)
    model = GPT(a.vocab, a.block, a.layers, a.heads, a.embd, fused).to(device)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    forward = model
    if a.compile:
        if not hasattr(torch, "compile"):
            sys.exit("--compile needs PyTorch >= 2.0 (this is %s)" % torch.__version__)
        forward = torch.compile(model)

    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, a.vocab, (a.batch, a.block), generator=g).to(device)
    y = torch.randint(0, a.vocab, (a.batch, a.block), generator=g).to(device)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            logits = forward(x)
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        sync()
        return loss.item()

    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    ms = []
    loss = float("nan")
    for i in range(a.warmup + a.steps):
        start = time.perf_counter()
        loss = step()
        elapsed = 1e3 * (time.perf_counter() - start)
        if i >= a.warmup:
            ms.append(elapsed)

    step_ms = statistics.median(ms)
    tokens = a.batch * a.block
    flops = 6.0 * params * tokens + 12.0 * a.layers * a.embd * a.block * tokens
    tflops = flops / (step_ms * 1e-3) / 1e12
    peak = a.peak_tflops or ((989.0 if a.dtype == "bf16" else 67.0) if cuda else 0.0)
    peak_mib = torch.cuda.max_memory_allocated(device) / 2**20 if cuda else 0.0
    figures = {
        "impl": "torch-" + torch.__version__.split("+")[0],
        "device": str(device),
        "dtype": a.dtype,
        "matmul": "cublas" if cuda else "cpu",
        "attention": "sdpa" if fused else "eager",
        "compile": int(a.compile),
        "layers": a.layers, "heads": a.heads, "embd": a.embd, "block": a.block, "vocab": a.vocab,
        "batch": a.batch, "params": params, "steps": len(ms),
        "ms_per_step": step_ms, "ms_min": min(ms), "tokens_per_s": tokens / (step_ms * 1e-3),
        "tflops": tflops, "peak_tflops": peak, "mfu": tflops / peak if peak > 0 else 0.0,
        "peak_mem_mib": peak_mib, "loss": loss,
    }
    print(" ".join("%s=%s" % (k, ("%.4g" % v) if isinstance(v, float) else v) for k, v in figures.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()

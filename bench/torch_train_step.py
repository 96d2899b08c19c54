#!/usr/bin/env python3
"""PyTorch CPU eager reference for brigade's training-step benchmark (scripts/bench_cpu_vs_torch.sh).

The same GPT as brigade's nn/gpt.h, in plain PyTorch (bench/torch_gpt.py).
Attention: --attention eager (matmul, masked_fill, softmax, matmul; what PyTorch 1.13 offers on the CPU) or
sdpa (F.scaled_dot_product_attention, PyTorch >= 2.0's fused kernel; the default where it exists). One
training step is what `brigade train` does (nn/trainer.cpp): zero the gradients, forward,
mean cross-entropy, backward, clip the global gradient norm to 1.0, AdamW (lr 1e-3, betas (0.9, 0.99), eps
1e-8, weight decay 0.1 on the >= 2-d parameters and 0 on biases and LayerNorm weights).

It runs `--warmup` steps, then times `--steps` steps one by one (time.perf_counter for wall time,
time.process_time for the CPU time of all the process's threads) and prints one line:
    torch ms/step median M min A max B steps N threads T cpu_ms/step median C
The batch is fixed random token ids (the step's cost does not depend on the values).

With --bf16 1 the forward and the loss run under torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's
CPU mixed precision (the Linears in bfloat16, softmax and cross-entropy in float32), as brigade's
train_step_bench --bf16 1 runs its own autocast.

Usage: python3 bench/torch_train_step.py --layers 2 --embd 64 --heads 4 --block 13 --batch 128 \
           --vocab 13 --threads 1 [--steps 20] [--warmup 3] [--attention eager|sdpa] [--dropout-percent 0..99] \
           [--bf16 0|1]
Needs only PyTorch (Debian's python3-torch, or PyPI's in scripts/torch_venv.sh's environment).
"""

import argparse
import contextlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from torch_gpt import GPT, has_sdpa


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in [("layers", 2), ("embd", 64), ("heads", 4), ("block", 13), ("batch", 128),
                          ("vocab", 13), ("threads", 1), ("steps", 20), ("warmup", 3), ("seed", 1337),
                          ("dropout-percent", 0), ("bf16", 0)]:
        parser.add_argument("--" + name, type=int, default=default)
    parser.add_argument("--attention", choices=["eager", "sdpa"], default="sdpa" if has_sdpa() else "eager")
    args = parser.parse_args()
    if args.attention == "sdpa" and not has_sdpa():
        parser.error(f"--attention sdpa needs PyTorch >= 2.0 (this is {torch.__version__})")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if not 0 <= args.dropout_percent <= 99:
        parser.error(f"--dropout-percent must lie in 0..99, found {args.dropout_percent}")
    model = GPT(args.vocab, args.block, args.layers, args.heads, args.embd, fused_attention=args.attention == "sdpa",
                dropout=args.dropout_percent / 100.0)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    x = torch.randint(0, args.vocab, (args.batch, args.block))
    y = torch.randint(0, args.vocab, (args.batch, args.block))

    if args.bf16 not in (0, 1):
        parser.error(f"--bf16 must be 0 or 1, found {args.bf16}")

    def mixed_precision():
        return torch.autocast("cpu", dtype=torch.bfloat16) if args.bf16 else contextlib.nullcontext()

    def step():
        opt.zero_grad(set_to_none=True)
        with mixed_precision():
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, args.vocab), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    times, cpu_times = [], []
    for _ in range(args.steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        step()
        times.append(1e3 * (time.perf_counter() - start))
        cpu_times.append(1e3 * (time.process_time() - cpu_start))
    print(f"torch ms/step median {statistics.median(times):.3f} min {min(times):.3f} max {max(times):.3f} "
          f"steps {args.steps} threads {torch.get_num_threads()} cpu_ms/step median {statistics.median(cpu_times):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""PyTorch CPU eager reference for brigade's training-step benchmark (scripts/bench_cpu_vs_torch.sh).

The same GPT as brigade's nn/gpt.h, written in plain PyTorch:
  token + learned position embedding -> n_layer pre-norm blocks
      x = x + proj(attention(ln1(x)))        qkv Linear [3C, C] with bias, causal softmax(q k^T / sqrt(D)) v
      x = x + proj(gelu_tanh(fc(ln2(x))))    fc [4C, C], GELU tanh approximation (brigade's), proj [C, 4C]
  -> final LayerNorm -> LM head tied to the token embedding (no bias); no dropout.
Attention is the eager formula (matmul, masked_fill, softmax, matmul): PyTorch 1.13 has no fused CPU
attention. One training step is what `brigade train` does (nn/trainer.cpp): zero the gradients, forward,
mean cross-entropy, backward, clip the global gradient norm to 1.0, AdamW (lr 1e-3, betas (0.9, 0.99), eps
1e-8, weight decay 0.1 on the >= 2-d parameters and 0 on biases and LayerNorm weights).

It runs `--warmup` steps, then times `--steps` steps one by one (time.perf_counter for wall time,
time.process_time for the CPU time of all the process's threads) and prints one line:
    torch ms/step median M min A max B steps N threads T cpu_ms/step median C
The batch is fixed random token ids (the step's cost does not depend on the values).

Usage: /usr/bin/python3 bench/torch_train_step.py --layers 2 --embd 64 --heads 4 --block 13 --batch 128 \
           --vocab 13 --threads 1 [--steps 20] [--warmup 3]
Needs only Debian's python3-torch.
"""

import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, embd, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(embd, eps=1e-5)
        self.qkv = nn.Linear(embd, 3 * embd)
        self.attn_proj = nn.Linear(embd, embd)
        self.ln2 = nn.LayerNorm(embd, eps=1e-5)
        self.fc = nn.Linear(embd, 4 * embd)
        self.mlp_proj = nn.Linear(4 * embd, embd)

    def attention(self, x):
        B, T, C = x.shape
        H, D = self.heads, C // self.heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, T, H, D).transpose(1, 2)
        v = v.view(B, T, H, D).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn_proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, block, layers, heads, embd):
        super().__init__()
        self.wte = nn.Embedding(vocab, embd)
        self.wpe = nn.Embedding(block, embd)
        self.blocks = nn.ModuleList(Block(embd, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(embd, eps=1e-5)
        # GPT-2 initialisation, as brigade's GPT::init_weights (the step's cost does not depend on it).
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif ".ln" in name or name.startswith("ln_f"):
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied LM head, no bias


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in [("layers", 2), ("embd", 64), ("heads", 4), ("block", 13), ("batch", 128),
                          ("vocab", 13), ("threads", 1), ("steps", 20), ("warmup", 3), ("seed", 1337)]:
        parser.add_argument("--" + name, type=int, default=default)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = GPT(args.vocab, args.block, args.layers, args.heads, args.embd)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    x = torch.randint(0, args.vocab, (args.batch, args.block))
    y = torch.randint(0, args.vocab, (args.batch, args.block))

    def step():
        opt.zero_grad(set_to_none=True)
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

#!/usr/bin/env python3
"""PyTorch's CPU kernels for the ops of bench/kernels_bench's CPU cases, at the same shapes, for a side by
side of one op at a time (scripts/bench_row_ops_vs_torch.sh runs both and prints the ratios).

The models are kernels_bench's (tests/ops/op_cases_perf.h): char128 (B 16, T 64, C 128, H 4, V 65, the
baby GPT's sizes) and gpt2-b1 (B 1, T 1024, C 768, H 12, V 50257, 12 layers: GPT-2 small at one
sequence). Each case calls the ATen op a PyTorch user's model reaches, float32, on --threads threads:

    softmax_fwd.attn        torch._softmax                                [B*H*T, T]
    softmax_bwd.attn        torch._softmax_backward_data                  [B*H*T, T]
    log_softmax_fwd.logits  torch._log_softmax                            [N, V]
    log_softmax_bwd.logits  torch._log_softmax_backward_data              [N, V]
    cross_entropy           F.cross_entropy and its gradient (autograd)   [N, V]
    cross_entropy_nograd    F.cross_entropy under no_grad                 [N, V]
    layernorm_fwd           torch.native_layer_norm (y, mean, rstd)       [N, C]
    layernorm_bwd           aten.native_layer_norm_backward (dx, dw, db)  [N, C]
    gelu_fwd, gelu_bwd      aten.gelu / aten.gelu_backward, tanh form     [N, 4C]
    unary_exp, _log, _sqrt, torch.exp, log, sqrt, rsqrt, tanh, sigmoid    [N, C], uniform [0.5, 2)
      _rsqrt, _tanh, _sigmoid
    attention_fwd           F.scaled_dot_product_attention, causal       [B, H, T, C/H]
    attention_bwd           its backward (autograd; forward excluded)     [B, H, T, C/H]
    embedding_fwd           F.embedding                                   [V, C] at N ids
    embedding_bwd           aten.embedding_dense_backward                 [N, C] into [V, C]
    adamw                   torch.optim.AdamW(fused=True).step            all P parameters in one tensor
    global_l2_norm          torch.linalg.vector_norm of the gradient      all P parameters in one tensor
    masked_fill.attn        Tensor.masked_fill, causal bool [T, T] mask   [B*H, T, T]
    sum_rows.bias_grad      Tensor.sum(0)                                 [N, 4C]
    sum_last, mean_last     Tensor.sum(-1), Tensor.mean(-1)               [N, C]
    max_last.logits,        Tensor.amax(-1), Tensor.argmax(-1)            [N, V]
      argmax.logits
    dropout                 F.dropout, p 0.1, training                    [N, C]

Timing as Google Benchmark's: each repetition calls the op until --min-time seconds have passed and keeps
the mean per call; one repetition more runs first as a warm-up; the median over --repetitions is printed, one line per case:
    torch CASE/MODEL us MEDIAN
and, with --out, written as JSON ({"cases": {"CASE/MODEL": {"us": [...], "median_us": M}}, "torch": version}).

Usage: python3 bench/torch_row_ops.py [--models char128,gpt2-b1] [--filter REGEX] [--threads 1]
           [--min-time 0.2] [--repetitions 3] [--out FILE]
"""

import argparse
import json
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

MODELS = {
    # name: (B, T, C, H, V, layers), as tests/ops/op_cases_perf.h
    "char128": (16, 64, 128, 4, 65, 2),
    "gpt2-b1": (1, 1024, 768, 12, 50257, 12),
}


def gpt_params(B, T, C, H, V, layers):
    """kernels_bench's parameter count (PerfModel::params): embeddings, blocks, final layernorm."""
    del B, H
    return V * C + T * C + layers * (12 * C * C + 13 * C) + 2 * C


def cases(model):
    """(name, callable) for each case of `model`; inputs are made once, outside the timing."""
    B, T, C, H, V, layers = MODELS[model]
    N, R, D = B * T, B * H * T, C // H
    g = torch.Generator().manual_seed(0)

    def randn(*shape, requires_grad=False):
        return torch.randn(*shape, generator=g).requires_grad_(requires_grad)

    out = []

    x = randn(R, T)
    y = torch._softmax(x, -1, False)
    dy = randn(R, T)
    out.append(("softmax_fwd.attn", lambda: torch._softmax(x, -1, False)))
    out.append(("softmax_bwd.attn", lambda: torch._softmax_backward_data(dy, y, -1, torch.float32)))

    logits = randn(N, V)
    log_y = torch._log_softmax(logits, -1, False)
    dlog = randn(N, V)
    out.append(("log_softmax_fwd.logits", lambda: torch._log_softmax(logits, -1, False)))
    out.append(("log_softmax_bwd.logits",
                lambda: torch._log_softmax_backward_data(dlog, log_y, -1, torch.float32)))

    targets = torch.randint(0, V, (N,), generator=g)
    logits_grad = logits.clone().requires_grad_(True)

    def cross_entropy():
        loss = F.cross_entropy(logits_grad, targets)
        return torch.autograd.grad(loss, logits_grad)

    def cross_entropy_nograd():
        with torch.no_grad():
            return F.cross_entropy(logits, targets)

    out.append(("cross_entropy", cross_entropy))
    out.append(("cross_entropy_nograd", cross_entropy_nograd))

    # The causal mask on the scores, as a model applies it before softmax (a bool [T, T] mask broadcast).
    scores = randn(B * H, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    out.append(("masked_fill.attn", lambda: scores.masked_fill(causal, -1e30)))

    h = randn(N, C)
    w, b = randn(C), randn(C)
    _, mean, rstd = torch.native_layer_norm(h, [C], w, b, 1e-5)
    dh = randn(N, C)
    out.append(("layernorm_fwd", lambda: torch.native_layer_norm(h, [C], w, b, 1e-5)))
    out.append(("layernorm_bwd", lambda: torch.ops.aten.native_layer_norm_backward(
        dh, h, [C], mean, rstd, w, b, [True, True, True])))

    # Reductions: the bias gradient (a column sum), a row sum and mean, the logits' row max and argmax.
    f = randn(N, 4 * C)
    out.append(("sum_rows.bias_grad", lambda: f.sum(0)))
    out.append(("sum_last", lambda: h.sum(-1)))
    out.append(("mean_last", lambda: h.mean(-1)))
    out.append(("max_last.logits", lambda: logits.amax(-1)))
    out.append(("argmax.logits", lambda: logits.argmax(-1)))
    out.append(("dropout", lambda: F.dropout(h, 0.1, training=True)))

    df = randn(N, 4 * C)
    out.append(("gelu_fwd", lambda: torch.ops.aten.gelu(f, approximate="tanh")))
    out.append(("gelu_bwd", lambda: torch.ops.aten.gelu_backward(df, f, approximate="tanh")))

    # The unary ops on kernels_bench's inputs: [N, C], uniform in [0.5, 2) (log, sqrt and rsqrt defined).
    u = torch.rand(N, C, generator=g) * 1.5 + 0.5
    for name, fn in (("exp", torch.exp), ("log", torch.log), ("sqrt", torch.sqrt), ("rsqrt", torch.rsqrt),
                     ("tanh", torch.tanh), ("sigmoid", torch.sigmoid)):
        out.append(("unary_" + name, lambda fn=fn: fn(u)))

    q, k, v = (randn(B, H, T, D, requires_grad=True) for _ in range(3))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    do = randn(B, H, T, D)
    out.append(("attention_fwd", lambda: F.scaled_dot_product_attention(
        q.detach(), k.detach(), v.detach(), is_causal=True)))
    # The backward alone: the graph is kept (retain_graph), so every call runs only the backward kernels.
    out.append(("attention_bwd", lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True)))

    table = randn(V, C)
    ids = torch.randint(0, V, (N,), generator=g)
    dids = randn(N, C)
    out.append(("embedding_fwd", lambda: F.embedding(ids, table)))
    out.append(("embedding_bwd", lambda: torch.ops.aten.embedding_dense_backward(dids, ids, V, -1, False)))

    P = gpt_params(*MODELS[model])
    param = torch.nn.Parameter(randn(P))
    param.grad = randn(P) * 1e-3
    opt = torch.optim.AdamW([param], lr=1e-9, weight_decay=0.1, fused=True)
    opt.step()  # the moments are allocated by the first step, outside the timing
    out.append(("adamw", opt.step))
    out.append(("global_l2_norm", lambda: torch.linalg.vector_norm(param.grad)))
    return out


def time_case(fn, min_time, repetitions):
    """Mean seconds per call for each repetition (each at least min_time long), after one more repetition
    as a warm-up (first calls allocate, fault pages in and pick kernels)."""
    results = []
    for _ in range(repetitions + 1):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        results.append(elapsed / calls)
    return results[1:]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="char128,gpt2-b1")
    parser.add_argument("--filter", default="", help="regex on CASE/MODEL")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            parser.error(f"unknown model {m!r}: expected one of {', '.join(MODELS)}")
    try:
        pattern = re.compile(args.filter)
    except re.error as e:
        parser.error(f"--filter: {e}")
    torch.set_num_threads(args.threads)
    report = {"torch": torch.__version__, "threads": args.threads, "cases": {}}
    for model in models:
        for name, fn in cases(model):
            key = f"{name}/{model}"
            if not pattern.search(key):
                continue
            seconds = time_case(fn, args.min_time, args.repetitions)
            us = [s * 1e6 for s in seconds]
            median = statistics.median(us)
            report["cases"][key] = {"us": us, "median_us": median}
            print(f"torch {key} us {median:.1f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if report["cases"] else 1


if __name__ == "__main__":
    sys.exit(main())

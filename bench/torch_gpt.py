"""brigade's GPT (nn/gpt.h) in plain PyTorch, shared by the PyTorch halves of the benchmarks
(bench/torch_train_step.py, bench/gpt2_step_torch.py).

  token + learned position embedding -> n_layer pre-norm blocks
      x = x + proj(attention(ln1(x)))        qkv Linear [3C, C] with bias, causal softmax(q k^T / sqrt(D)) v
      x = x + proj(gelu_tanh(fc(ln2(x))))    fc [4C, C], GELU tanh approximation (brigade's), proj [C, 4C]
  -> final LayerNorm -> LM head tied to the token embedding (no bias); GPT-2 initialisation.
Dropout (0 unless given) where brigade's GPT has it: after the embeddings, on the attention weights, and
on each block's two residual branches.
Attention is the eager formula (matmul, masked_fill, softmax, matmul) unless fused_attention, which uses
F.scaled_dot_product_attention (PyTorch >= 2.0: check has_sdpa() first). Uses only APIs PyTorch 1.13 has.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def has_sdpa():
    return hasattr(F, "scaled_dot_product_attention")


class Block(nn.Module):
    def __init__(self, embd, heads, fused_attention=False, dropout=0.0):
        super().__init__()
        self.heads = heads
        self.fused_attention = fused_attention
        self.dropout = dropout
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
        p = self.dropout if self.training else 0.0
        if self.fused_attention:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            y = F.dropout(F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), p) @ v
        return F.dropout(self.attn_proj(y.transpose(1, 2).reshape(B, T, C)), p)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        p = self.dropout if self.training else 0.0
        return x + F.dropout(self.mlp_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh")), p)


class GPT(nn.Module):
    def __init__(self, vocab, block, layers, heads, embd, fused_attention=False, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        self.wte = nn.Embedding(vocab, embd)
        self.wpe = nn.Embedding(block, embd)
        self.blocks = nn.ModuleList([Block(embd, heads, fused_attention, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(embd, eps=1e-5)
        # GPT-2 initialisation, as brigade's GPT::init_weights: N(0, 0.02), residual projections
        # N(0, 0.02 / sqrt(2 L)), biases 0, LayerNorm weights 1.
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
        x = self.wte(ids) + self.wpe(torch.arange(T, device=ids.device))
        x = F.dropout(x, self.dropout if self.training else 0.0)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied LM head, no bias

#!/usr/bin/env python3
"""PyTorch reference for brigade's GPT: writes the expected fixtures of tests/nn/torch_crosscheck_test.cpp.

For every tests/nn/fixtures/crosscheck_<case>_input.safetensors (written by brigade's make_crosscheck_input:
the GPT's float32 weights, a batch "batch.ids"/"batch.targets" and the GPTConfig JSON in the metadata) this
script builds the same GPT in plain PyTorch, runs forward and backward in float64 on the CPU and writes
crosscheck_<case>_expected.safetensors next to it:

    logits                  float64 [B, T, V]
    loss                    float64 [] (mean cross-entropy over targets != -100)
    grad.<parameter name>   float64, one per input weight (a tied weight once, with both uses summed)

plus metadata (torch version, date, the input file's checksum). Float64 makes the reference far more
accurate than brigade's float32, so the test measures brigade's error, not the reference's.

It needs only PyTorch (Debian's python3-torch, which brings numpy): the files are read and written by the
small safetensors codec below, not by the `safetensors` package. See docs/crosscheck.md.

Usage: /usr/bin/python3 scripts/torch_crosscheck.py [FIXTURE_DIR]
"""

import datetime
import glob
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

# ---- safetensors codec ------------------------------------------------------------------------------------
# Layout: uint64 LE header length N, N bytes of JSON header, then the data section (row-major, little-endian).

DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I32": np.dtype("<i4"), "I64": np.dtype("<i8")}


def fnv1a64(data):
    """FNV-1a 64, brigade's checksum of the data section (nn/safetensors.h)."""
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def header_checksum(header):
    """brigade.header_checksum: FNV-1a 64 of the canonical header text, that key left out (nn/safetensors.h)."""
    header = dict(header, __metadata__={k: v for k, v in header["__metadata__"].items()
                                        if k != "brigade.header_checksum"})
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "%016x" % fnv1a64(text.encode("utf-8"))


def read_safetensors(path):
    """Returns ({name: torch tensor}, metadata dict, data section bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    data = blob[8 + n :]
    stored = header.get("__metadata__", {}).get("brigade.header_checksum")
    if stored is not None and stored != header_checksum(header):
        raise SystemExit("%s: header does not match its brigade.header_checksum" % path)
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        tensors[name] = torch.from_numpy(array.copy())
    checksum = metadata.get("brigade.checksum")
    if checksum is not None and checksum != "%016x" % fnv1a64(data):
        raise SystemExit("%s: data does not match its brigade.checksum" % path)
    return tensors, metadata, data


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, float64 torch tensor). Adds brigade's format version and both checksums so
    that brigade's loader verifies the file."""
    header, chunks, offset = {}, [], 0
    for name, tensor in tensors:
        raw = tensor.detach().contiguous().numpy().astype("<f8").tobytes()
        header[name] = {"dtype": "F64", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    data = b"".join(chunks)
    meta = dict(metadata)
    meta["brigade.format_version"] = "1"
    meta["brigade.checksum"] = "%016x" % fnv1a64(data)
    header = {"__metadata__": meta, **header}
    meta["brigade.header_checksum"] = header_checksum(header)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((-(8 + len(text))) % 8)  # the data section starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)
    os.replace(tmp, path)


# ---- the GPT (nn/gpt.h), written out op by op ---------------------------------------------------------------


class Params:
    """The weights by brigade's dotted names; records which were used, so that none is silently ignored."""

    def __init__(self, tensors):
        self.tensors = tensors
        self.used = set()

    def __call__(self, name):
        self.used.add(name)
        return self.tensors[name]

    def get(self, name):  # optional parameters (biases with config.bias false)
        return self(name) if name in self.tensors else None


def linear(p, prefix, x):
    """y = x W^T + b; W [out, in]."""
    y = x @ p(prefix + ".weight").t()
    bias = p.get(prefix + ".bias")
    return y if bias is None else y + bias


def layer_norm(p, prefix, x):
    return F.layer_norm(x, (x.shape[-1],), p(prefix + ".weight"), p.get(prefix + ".bias"), eps=1e-5)


def attention(p, prefix, x, n_head):
    """Causal multi-head self-attention: qkv splits as [q | k | v], each [B, T, H, D] (nn/attention.h)."""
    B, T, C = x.shape
    D = C // n_head
    q, k, v = linear(p, prefix + ".qkv", x).split(C, dim=2)
    q, k, v = (t.view(B, T, n_head, D).transpose(1, 2) for t in (q, k, v))  # [B, H, T, D]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)  # [B, H, T, T]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # a query sees itself and the past
    att = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    y = (att @ v).transpose(1, 2).reshape(B, T, C)
    return linear(p, prefix + ".proj", y)


def mlp(p, prefix, x):
    return linear(p, prefix + ".proj", F.gelu(linear(p, prefix + ".fc", x), approximate="tanh"))


def gpt_forward(p, config, ids):
    """ids [B, T] -> logits [B, T, V]: embeddings, pre-norm blocks, final LayerNorm, LM head."""
    T = ids.shape[1]
    x = p("embed.wte.weight")[ids] + p("embed.wpe.weight")[:T]
    for i in range(config["n_layer"]):
        block = "blocks.%d" % i
        x = x + attention(p, block + ".attn", layer_norm(p, block + ".ln1", x), config["n_head"])
        x = x + mlp(p, block + ".mlp", layer_norm(p, block + ".ln2", x))
    x = layer_norm(p, "head.ln_f", x)
    head = p("embed.wte.weight") if config["tie_weights"] else p("head.lm_head.weight")
    return x @ head.t()


def run(weights, config, ids, targets, dtype):
    """Forward + backward in `dtype`: (logits, loss, {name: grad}, names of the weights used)."""
    leaves = {name: w.to(dtype).requires_grad_(True) for name, w in weights.items()}
    p = Params(leaves)
    logits = gpt_forward(p, config, ids)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
    loss.backward()
    grads = {name: leaf.grad for name, leaf in leaves.items()}
    return logits.detach(), loss.detach(), grads, p.used


def rel(a, b):
    return (torch.linalg.norm((a - b).flatten()) / torch.linalg.norm(b.flatten())).item()


def crosscheck(input_path):
    tensors, metadata, data = read_safetensors(input_path)
    config = json.loads(metadata["crosscheck.config"])
    if config.get("dropout", 0.0) != 0.0:
        raise SystemExit("%s: the cross-check needs dropout 0" % input_path)
    ids = tensors.pop("batch.ids").long()
    targets = tensors.pop("batch.targets").long()
    weights = tensors  # every remaining entry is a parameter

    logits, loss, grads, used = run(weights, config, ids, targets, torch.float64)
    unused = sorted(set(weights) - used)
    if unused:
        raise SystemExit("%s: weights the model did not use: %s" % (input_path, unused))
    missing = sorted(name for name, g in grads.items() if g is None)
    if missing:
        raise SystemExit("%s: no gradient reached %s" % (input_path, missing))

    # For the record: how far PyTorch's own float32 run lies from this float64 reference.
    logits32, loss32, grads32, _ = run(weights, config, ids, targets, torch.float32)
    worst_grad32 = max(rel(grads32[n].double(), grads[n]) for n in grads)

    out = [("logits", logits), ("loss", loss)] + [("grad." + n, grads[n]) for n in weights]
    expected_path = input_path.replace("_input.safetensors", "_expected.safetensors")
    write_safetensors(
        expected_path,
        out,
        {
            "crosscheck.case": metadata.get("crosscheck.case", ""),
            "crosscheck.config": metadata["crosscheck.config"],
            "crosscheck.input_checksum": "%016x" % fnv1a64(data),
            "crosscheck.reference": "PyTorch float64 CPU, scripts/torch_crosscheck.py",
            "crosscheck.torch_version": torch.__version__,
            "crosscheck.date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    )
    print(
        "%s: loss %.10f, %d gradients; torch float32 vs float64: loss %.2e, logits %.2e, worst grad %.2e"
        % (
            os.path.basename(expected_path),
            loss.item(),
            len(grads),
            abs(loss32.item() - loss.item()) / abs(loss.item()),
            rel(logits32.double(), logits),
            worst_grad32,
        )
    )


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    fixture_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "nn", "fixtures")
    inputs = sorted(glob.glob(os.path.join(fixture_dir, "crosscheck_*_input.safetensors")))
    if not inputs:
        raise SystemExit("no crosscheck_*_input.safetensors in %s (run make_crosscheck_input first)" % fixture_dir)
    torch.set_num_threads(1)  # deterministic reductions
    for path in inputs:
        crosscheck(path)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""bench_torch.py: the PyTorch baseline of dev/bench_cpu.sh.

Times one training step (zero grads, forward, backward, global-norm clipping, AdamW) of
the same Megatron GPT that train_gpt builds, in fp32 on the CPU with the same number of
threads, and prints one JSON line with the median step time, tokens/s and GFLOP/s by the
paper's formula (the one train_gpt logs), so the two can be set side by side.

Model, as in train_gpt (doc/spec.md section 1): token + learned position embedding, L pre-LN
blocks (x += Attn(LN1(x)); x += MLP(LN2(x))), final LN, LM head tied to the token
embedding; causal attention with 1/sqrt(head_dim) scale, biases on QKV and output
projections; MLP H -> 4H -> H with GeLU (tanh); LayerNorm eps 1e-5; no dropout. The
embedding has Vp rows (V padded to a multiple of vpad) but, as in train_gpt, only the V
real rows make logits, so the padding costs memory, never compute.
AdamW: betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on matrices and embeddings only.
Attention: torch.nn.functional.scaled_dot_product_attention (causal) where this torch has it
(2.0 on), as a PyTorch user writes it today (nanoGPT does the same), else the explicit
softmax(QK^T) V; -attn picks one. Eager mode: torch.compile is not used.

Runs with any torch: Debian's (/usr/bin/python3, python3-torch 1.13) or PyTorch 2.x from
PyPI in its own venv (dev/bench_cpu.sh makes one); the JSON line names the version, the
BLAS it computes with and the CPU capability torch uses.
  /usr/bin/python3 dev/bench_torch.py -model 125m -seq 64 -mb 4 -steps 8 -warmup-steps 2
"""
import argparse
import json
import math
import os
import re
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {  # name -> (L, H, heads, seq), as llmc/host/config.h
    "tiny": (4, 128, 4, 256), "125m": (12, 768, 12, 2048), "350m": (24, 1024, 16, 2048),
    "1.3b": (24, 2048, 16, 2048), "6.7b": (32, 4096, 32, 2048), "530b": (105, 20480, 128, 2048),
}


class Block(nn.Module):
    def __init__(self, H, heads, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln1 = nn.LayerNorm(H, eps=1e-5)
        self.qkv = nn.Linear(H, 3 * H)
        self.proj = nn.Linear(H, H)
        self.ln2 = nn.LayerNorm(H, eps=1e-5)
        self.fc1 = nn.Linear(H, 4 * H)
        self.fc2 = nn.Linear(4 * H, H)

    def forward(self, x, mask):
        B, T, H = x.shape
        hs = H // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(H, dim=2)
        q = q.view(B, T, self.heads, hs).transpose(1, 2)
        k = k.view(B, T, self.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.heads, hs).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            y = att.masked_fill(mask[:T, :T], float("-inf")).softmax(dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, H)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, L, H, heads, seq, V, Vp, sdpa):
        super().__init__()
        self.V = V
        self.wte = nn.Parameter(torch.empty(Vp, H))
        self.wpe = nn.Parameter(torch.empty(seq, H))
        self.blocks = nn.ModuleList([Block(H, heads, sdpa) for _ in range(L)])
        self.lnf = nn.LayerNorm(H, eps=1e-5)
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1))
        s = math.sqrt(1.0 / (3.0 * H))
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
            elif name.endswith("proj.weight") or name.endswith("fc2.weight"):
                nn.init.normal_(p, 0.0, s / math.sqrt(2 * L))  # scaled init
            else:
                nn.init.normal_(p, 0.0, s)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte[idx] + self.wpe[:T]
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.lnf(x) @ self.wte[: self.V].t()  # tied head, real vocabulary only
        return F.cross_entropy(logits.view(-1, self.V), targets.reshape(-1))


def model_flops(f, B, s, L, H, V):
    """The paper's FLOPs per step (llmc/host/schedule.h model_flops)."""
    return 24.0 * f * B * s * L * H * H * (1.0 + s / (6.0 * H) + V / (16.0 * L * H))


def load_tokens(pattern_dir, V):
    """The first train shard in llm.c's format (1024-byte header, then uint16 tokens)."""
    path = os.path.join(pattern_dir, "kjv_train_000.bin")
    if not os.path.exists(path):
        return None
    hdr = np.fromfile(path, dtype=np.int32, count=256)
    if hdr[0] != 20240520:
        sys.exit(f"bench_torch: {path} is not an llm.c token shard")
    toks = np.fromfile(path, dtype=np.uint16, offset=1024).astype(np.int64)
    if toks.max() >= V:
        sys.exit(f"bench_torch: {path} holds ids >= V={V}")
    return torch.from_numpy(toks)


def loaded_blas():
    """The BLAS shared library this process actually mapped (after a matmul has run)."""
    libs = set()
    try:
        for line in open("/proc/self/maps"):
            path = line.split()[-1]
            name = os.path.basename(path)
            if "blas" in name or "blis" in name or "mkl_core" in name:
                libs.add(os.path.realpath(path))
    except OSError:
        return "unknown"
    return ",".join(sorted(libs)) or "none"


def backend():
    """(BLAS, CPU capability) from torch's build configuration: e.g. ("mkl", "AVX512")."""
    cfg = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", cfg)
    cap = re.search(r"CPU capability usage: (\w+)", cfg)
    return blas.group(1) if blas else "?", cap.group(1) if cap else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-model", default="125m", choices=sorted(PRESETS))
    ap.add_argument("-seq", type=int, default=0, help="sequence length (0: the preset's)")
    ap.add_argument("-mb", type=int, default=4, help="sequences per step")
    ap.add_argument("-V", type=int, default=50257)
    ap.add_argument("-vpad", type=int, default=1024)
    ap.add_argument("-steps", type=int, default=8, help="timed steps")
    ap.add_argument("-warmup-steps", type=int, default=2, help="untimed steps first")
    ap.add_argument("-threads", type=int, default=0, help="0: os.cpu_count()")
    ap.add_argument("-data", default="dev/data/kjv", help="directory with kjv_train_000.bin (random ids if absent)")
    ap.add_argument("-seed", type=int, default=1337)
    ap.add_argument("-attn", choices=["auto", "sdpa", "manual"], default="auto",
                    help="auto: scaled_dot_product_attention where torch has it (2.0 on)")
    a = ap.parse_args()
    have_sdpa = hasattr(F, "scaled_dot_product_attention")
    if a.attn == "sdpa" and not have_sdpa:
        sys.exit(f"bench_torch: torch {torch.__version__} has no scaled_dot_product_attention (-attn manual)")
    sdpa = have_sdpa and a.attn != "manual"

    L, H, heads, seq = PRESETS[a.model]
    T = a.seq or seq
    Vp = (a.V + a.vpad - 1) // a.vpad * a.vpad
    threads = a.threads or os.cpu_count()
    torch.set_num_threads(threads)  # the trainer's -threads: the same cores for both
    if torch.get_num_threads() != threads:
        sys.exit(f"bench_torch: torch runs {torch.get_num_threads()} threads, not {threads}")
    torch.manual_seed(a.seed)

    model = GPT(L, H, heads, T, a.V, Vp, sdpa)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    toks = load_tokens(a.data, a.V)
    gen = torch.Generator().manual_seed(a.seed)

    def batch():
        if toks is None:
            xy = torch.randint(0, a.V, (a.mb, T + 1), generator=gen)
        else:
            starts = torch.randint(0, len(toks) - T - 1, (a.mb,), generator=gen)
            xy = torch.stack([toks[s: s + T + 1] for s in starts.tolist()])
        return xy[:, :-1].contiguous(), xy[:, 1:].contiguous()

    times, losses = [], []
    for i in range(a.warmup_steps + a.steps):
        x, y = batch()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ms = (time.perf_counter() - t0) * 1e3
        losses.append(loss.item())
        if i >= a.warmup_steps:
            times.append(ms)
        print(f"torch step {i + 1:3d} | loss {losses[-1]:.4f} | ms {ms:.1f}{'' if i >= a.warmup_steps else ' (warmup)'}",
              file=sys.stderr, flush=True)

    ms = statistics.median(times)
    flops = model_flops(3, a.mb, T, L, H, Vp)
    nparams = sum(p.numel() for p in model.parameters())
    print(json.dumps({
        "impl": f"pytorch {torch.__version__}", "model": a.model, "L": L, "H": H, "heads": heads, "seq": T,
        "mb": a.mb, "V": a.V, "Vp": Vp, "params": nparams, "threads": threads, "steps": a.steps,
        "ms_median": ms, "ms_min": min(times), "ms_max": max(times),
        "tok_s": a.mb * T / (ms / 1e3), "gflops": flops / (ms / 1e3) / 1e9, "flops_per_step": flops,
        "first_loss": losses[0], "blas": loaded_blas(), "blas_info": backend()[0], "cpu_capability": backend()[1],
        "attention": "sdpa" if sdpa else "manual", "torch_threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()

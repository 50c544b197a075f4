#!/usr/bin/env python3
"""bench_torch_gpu.py: the PyTorch baseline that dev/gpu_check.sh sets beside train_gpt_cu.

Times training steps of the same Megatron GPT that train_gpt_cu builds, on one GPU, in
the same mixed precision: fp32 weights, AdamW moments and gradients, bf16 autocast for
the matmuls and activations, fused causal attention (F.scaled_dot_product_attention,
which picks FlashAttention on sm_80/sm_90), optionally torch.compile. One step = zero
grads, gb/mb micro-batches of forward + backward (gradients accumulated), global-norm
clipping at 1.0, AdamW (fused when available). Prints one JSON line: median step time
over the timed steps, tokens/s, TFLOP/s per GPU by the paper's formula (the one
train_gpt_cu logs, f=3 without recompute) and MFU against -peak.

Model, as in train_gpt (SPEC section 1): token + learned position embedding, L pre-LN
blocks (x += Attn(LN1(x)); x += MLP(LN2(x))), final LN, LM head tied to the token
embedding over the V real rows only (the padded rows never make logits); causal attention
with 1/sqrt(head_dim) scale, biases on every linear layer; MLP H -> 4H -> H with GeLU
(tanh); LayerNorm eps 1e-5; no dropout. AdamW betas (0.9, 0.95), eps 1e-8, weight decay
0.1 on matrices and embeddings only.

usage: python3 dev/bench_torch_gpu.py -model 1.3b -mb 4 -gb 16 -steps 6 -warmup-steps 2 -compile auto -peak 989
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {  # name -> (L, H, heads, seq), as llmc/config.h
    "tiny": (4, 128, 4, 256), "125m": (12, 768, 12, 2048), "350m": (24, 1024, 16, 2048),
    "1.3b": (24, 2048, 16, 2048), "6.7b": (32, 4096, 32, 2048), "530b": (105, 20480, 128, 2048),
}


class Block(nn.Module):
    def __init__(self, H, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(H, eps=1e-5)
        self.qkv = nn.Linear(H, 3 * H)
        self.proj = nn.Linear(H, H)
        self.ln2 = nn.LayerNorm(H, eps=1e-5)
        self.fc1 = nn.Linear(H, 4 * H)
        self.fc2 = nn.Linear(4 * H, H)

    def forward(self, x):
        B, T, H = x.shape
        hs = H // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(H, dim=2)
        q = q.view(B, T, self.heads, hs).transpose(1, 2)
        k = k.view(B, T, self.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.heads, hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, H)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, L, H, heads, T, V, Vp):
        super().__init__()
        self.V = V
        self.wte = nn.Embedding(Vp, H)
        self.wpe = nn.Embedding(T, H)
        self.blocks = nn.ModuleList([Block(H, heads) for _ in range(L)])
        self.lnf = nn.LayerNorm(H, eps=1e-5)
        s = math.sqrt(1.0 / (3 * H))
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln" in name:
                nn.init.ones_(p)
            elif name.endswith("proj.weight") or name.endswith("fc2.weight"):
                nn.init.normal_(p, std=s / math.sqrt(2 * L))
            else:
                nn.init.normal_(p, std=s)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        x = self.lnf(x)
        logits = x @ self.wte.weight[: self.V].t()  # real vocabulary rows only
        return F.cross_entropy(logits.float().view(-1, self.V), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-model", default="1.3b", choices=sorted(PRESETS))
    ap.add_argument("-seq", type=int, default=0, help="override the preset's sequence length")
    ap.add_argument("-V", type=int, default=50257)
    ap.add_argument("-vpad", type=int, default=1024)
    ap.add_argument("-mb", type=int, default=4)
    ap.add_argument("-gb", type=int, default=16)
    ap.add_argument("-steps", type=int, default=6, help="timed steps")
    ap.add_argument("-warmup-steps", type=int, default=2)
    ap.add_argument("-compile", default="auto", choices=["auto", "0", "1"])
    ap.add_argument("-peak", type=float, default=989.0, help="bf16 dense TFLOP/s of the device (MFU)")
    ap.add_argument("-compile-timeout", type=float, default=240.0, help="seconds; auto falls back to eager beyond it")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"impl": "pytorch", "error": "no CUDA device"}))
        return 1
    L, H, heads, T = PRESETS[a.model]
    if a.seq:
        T = a.seq
    Vp = (a.V + a.vpad - 1) // a.vpad * a.vpad
    if a.gb % a.mb:
        sys.exit("-gb must be a multiple of -mb")
    dev = "cuda"
    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = GPT(L, H, heads, T, a.V, Vp).to(dev)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    nodecay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
        fused = True
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
        fused = False
    nmicro = a.gb // a.mb
    g = torch.Generator(device=dev).manual_seed(7)
    data = torch.randint(0, a.V, (nmicro, a.mb, T + 1), device=dev, generator=g)

    fwd = model
    compiled = False
    note = ""
    if a.compile in ("auto", "1"):
        try:
            fwd = torch.compile(model)
            compiled = True
        except Exception as e:  # torch.compile missing or broken: eager
            note = "torch.compile unavailable: %s" % type(e).__name__
            if a.compile == "1":
                raise

    def step():
        opt.zero_grad(set_to_none=True)
        for k in range(nmicro):
            x, y = data[k, :, :-1], data[k, :, 1:]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = fwd(x, y)
            (loss / nmicro).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    times = []
    t_first = time.time()
    try:
        for i in range(a.warmup_steps + a.steps):
            torch.cuda.synchronize()
            t0 = time.time()
            loss = step()
            torch.cuda.synchronize()
            dt = time.time() - t0
            if i >= a.warmup_steps:
                times.append(dt)
            if compiled and a.compile == "auto" and i == 0 and time.time() - t_first > a.compile_timeout:
                note = "first compiled step took %.0fs" % (time.time() - t_first)
    except Exception as e:
        if compiled and a.compile == "auto":  # a compile failure: redo eagerly
            note = "torch.compile failed (%s): eager" % type(e).__name__
            fwd, compiled, times = model, False, []
            for i in range(a.warmup_steps + a.steps):
                torch.cuda.synchronize()
                t0 = time.time()
                loss = step()
                torch.cuda.synchronize()
                if i >= a.warmup_steps:
                    times.append(time.time() - t0)
        else:
            raise
    ms = 1e3 * statistics.median(times)
    tokens = a.gb * T
    flops = 24.0 * 3 * a.gb * T * L * H * H * (1.0 + T / (6.0 * H) + Vp / (16.0 * L * H))
    tflops = flops / (ms / 1e3) / 1e12
    out = {
        "impl": "pytorch" + (" compiled" if compiled else " eager"), "model": a.model, "seq": T, "mb": a.mb, "gb": a.gb,
        "ms": round(ms, 2), "tok_s": round(tokens / (ms / 1e3), 1), "tflops": round(tflops, 2),
        "mfu": round(tflops / a.peak, 4) if a.peak > 0 else None, "loss": float(loss), "fused_adamw": fused,
        "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
        "max_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "note": note,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

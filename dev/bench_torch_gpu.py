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

Model, as in train_gpt (doc/spec.md section 1): token + learned position embedding, L pre-LN
blocks (x += Attn(LN1(x)); x += MLP(LN2(x))), final LN, LM head tied to the token
embedding over the V real rows only (the padded rows never make logits); causal attention
with 1/sqrt(head_dim) scale, biases on every linear layer; MLP H -> 4H -> H with GeLU
(tanh); LayerNorm eps 1e-5; no dropout. AdamW betas (0.9, 0.95), eps 1e-8, weight decay
0.1 on matrices and embeddings only.

Correctness against the trainers (-init llmc -data SHARD): the initial weights are drawn
exactly as llmc/host/params.h param_init does (llmc/host/rand.h normal_at(seed, tensor id, index in
the full tensor), cast to fp32), vectorised in torch and in chunks so 1.3B parameters fit
on the device; training reads the llm.c shard SHARD (256 int32 header, uint16 tokens;
sample i = tokens [i*T, i*T+T+1)) in train_gpt's -shuffle 0 order: step k takes samples
[(k-1)*gb, k*gb), split into micro-batches in order. With a constant -lr (train_gpt:
-warmup 0 and a -decay far beyond the run) both run the same recipe, so the per-step
losses ("losses" in the JSON line, before any warm-up/timed split) must agree with
train_gpt's: to ~1e-5 with -device cpu -dtype fp32 (tests/test_bench_torch_init.py), to bf16
tolerance on a GPU with train_gpt_cu (dev/gpu_check.sh).

usage: python3 dev/bench_torch_gpu.py -model 1.3b -mb 4 -gb 16 -steps 6 -warmup-steps 2 -compile auto -peak 989
       python3 dev/bench_torch_gpu.py -model 1.3b -init llmc -seed 1337 -data synth_000.bin -lr 1e-4 ...
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

PRESETS = {  # name -> (L, H, heads, seq), as llmc/host/config.h
    "tiny": (4, 128, 4, 256), "125m": (12, 768, 12, 2048), "350m": (24, 1024, 16, 2048),
    "1.3b": (24, 2048, 16, 2048), "6.7b": (32, 4096, 32, 2048), "530b": (105, 20480, 128, 2048),
}


# llmc/host/params.h ParamId: the tensor id is the stream of the counter-based normal
PT = {n: i for i, n in enumerate(["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                                   "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"])}
M64 = (1 << 64) - 1


def _s64(c):  # a uint64 constant as the int64 with the same bits
    c &= M64
    return c - (1 << 64) if c >= 1 << 63 else c


def _srl(x, k):  # logical right shift of int64 bits (torch's >> is arithmetic)
    return (x >> k) & ((1 << (64 - k)) - 1)


def splitmix64_t(x):  # llmc/host/rand.h splitmix64 on int64 tensors (multiplies wrap mod 2^64)
    x = x + _s64(0x9E3779B97F4A7C15)
    x = (x ^ _srl(x, 30)) * _s64(0xBF58476D1CE4E5B9)
    x = (x ^ _srl(x, 27)) * _s64(0x94D049BB133111EB)
    return x ^ _srl(x, 31)


def splitmix64_py(x):  # the same on Python ints, for the per-stream key
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def normal_at(seed, stream, index):
    """llmc/host/rand.h normal_at for an int64 tensor of indices: float64 N(0,1) (Box-Muller)."""
    k = _s64(splitmix64_py((seed & M64) ^ splitmix64_py((stream * 0x632BE59BD9B4E019 + 0x1234567) & M64)))
    a = splitmix64_t(index * 2 ^ k)
    b = splitmix64_t((index * 2 + 1) ^ k)
    u1 = (_srl(a, 11).double() + 1.0) * (1.0 / 9007199254740992.0)
    u2 = (_srl(b, 11).double() + 1.0) * (1.0 / 9007199254740992.0)
    return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * math.pi * u2)


def read_shard(path, need):
    """the first `need` tokens of an llm.c shard (256 int32 header: magic, version, ntokens)."""
    import struct
    try:
        f = open(path, "rb")
    except OSError as e:
        sys.exit("error: cannot open shard %s: %s" % (path, e.strerror))
    with f:
        hdr = f.read(1024)
        if len(hdr) < 1024:
            sys.exit("error: %s: no complete 256-int32 header" % path)
        magic, _, ntok = struct.unpack("<3i", hdr[:12])
        if magic != 20240520:
            sys.exit("error: %s is not an llm.c token shard (magic %d)" % (path, magic))
        if ntok < need:
            sys.exit("error: %s has %d tokens; the run needs %d (steps x gb x T + 1)" % (path, ntok, need))
        buf = f.read(2 * need)
    if len(buf) < 2 * need:
        sys.exit("error: %s is truncated" % path)
    return torch.frombuffer(bytearray(buf), dtype=torch.int16).to(torch.int64) & 0xFFFF


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
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0 (Debian's 1.13, the CPU test): the same attention, unfused
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, H)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, L, H, heads, T, V, Vp, torch_init=True):
        super().__init__()
        self.V = V
        self.wte = nn.Embedding(Vp, H)
        self.wpe = nn.Embedding(T, H)
        self.blocks = nn.ModuleList([Block(H, heads) for _ in range(L)])
        self.lnf = nn.LayerNorm(H, eps=1e-5)
        s = math.sqrt(1.0 / (3 * H))
        for name, p in self.named_parameters() if torch_init else []:  # -init llmc draws them on the device
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln" in name:
                nn.init.ones_(p)
            elif name.endswith("proj.weight") or name.endswith("fc2.weight"):
                nn.init.normal_(p, std=s / math.sqrt(2 * L))
            else:
                nn.init.normal_(p, std=s)

    def init_llmc(self, seed, L, scaled_init=True, chunk=1 << 24):
        """The trainers' initial weights (llmc/host/params.h param_init), bit for bit up to libm."""
        H = self.lnf.weight.shape[0]
        s = math.sqrt(1.0 / (3.0 * H))
        ss = s / math.sqrt(2.0 * L) if scaled_init else s
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                    continue
                if "ln" in name:
                    p.fill_(1.0)
                    continue
                if name == "wte.weight":
                    tid, layer, std = PT["wte"], 0, s
                elif name == "wpe.weight":
                    tid, layer, std = PT["wpe"], 0, s
                else:  # blocks.<l>.<qkv|proj|fc1|fc2>.weight
                    _, l, mod, _ = name.split(".")
                    tid = PT[{"qkv": "qkvw", "proj": "attprojw", "fc1": "fcw", "fc2": "fcprojw"}[mod]]
                    layer = int(l)
                    std = ss if mod in ("proj", "fc2") else s
                rows, cols = p.shape  # nn.Linear (out, in) = our (rows, cols); qkv rows [Q | K | V]
                base = layer * rows * cols  # index of (layer, 0, 0) in the full (L, rows, cols) tensor
                flat = p.view(-1)
                n = rows * cols if name != "wte.weight" else self.V * cols  # padded wte rows: 0
                if name == "wte.weight":
                    flat[n:].zero_()
                for a in range(0, n, chunk):
                    b = min(n, a + chunk)
                    idx = torch.arange(base + a, base + b, dtype=torch.int64, device=p.device)
                    flat[a:b] = (std * normal_at(seed, tid, idx)).to(p.dtype)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        x = self.lnf(x)
        logits = x @ self.wte.weight[: self.V].t()  # real vocabulary rows only
        return F.cross_entropy(logits.float().reshape(-1, self.V), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-model", default="1.3b", choices=sorted(PRESETS))
    ap.add_argument("-seq", type=int, default=0, help="override the preset's sequence length")
    ap.add_argument("-L", type=int, default=0, help="override the preset's layers")
    ap.add_argument("-H", type=int, default=0, help="override the preset's hidden size")
    ap.add_argument("-heads", type=int, default=0, help="override the preset's heads")
    ap.add_argument("-V", type=int, default=50257)
    ap.add_argument("-vpad", type=int, default=1024)
    ap.add_argument("-mb", type=int, default=4)
    ap.add_argument("-gb", type=int, default=16)
    ap.add_argument("-steps", type=int, default=6, help="timed steps")
    ap.add_argument("-warmup-steps", type=int, default=2)
    ap.add_argument("-compile", default="auto", choices=["auto", "0", "1"])
    ap.add_argument("-peak", type=float, default=989.0, help="bf16 dense TFLOP/s of the device (MFU)")
    ap.add_argument("-compile-timeout", type=float, default=240.0, help="seconds; auto falls back to eager beyond it")
    ap.add_argument("-init", default="torch", choices=["torch", "llmc"], help="llmc: the trainers' initial weights")
    ap.add_argument("-seed", type=int, default=1337, help="-init llmc: the trainers' -seed")
    ap.add_argument("-scaled-init", type=int, default=1, choices=[0, 1], help="-init llmc: the trainers' -scaled-init")
    ap.add_argument("-data", default="", help="llm.c token shard, read in train_gpt's -shuffle 0 order (default: random tokens)")
    ap.add_argument("-lr", type=float, default=1e-4, help="constant learning rate")
    ap.add_argument("-device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("-dtype", default="bf16", choices=["bf16", "fp32"], help="bf16: autocast matmuls; fp32: none, no TF32")
    a = ap.parse_args()
    dev = a.device
    if dev == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"impl": "pytorch", "error": "no CUDA device"}))
        return 1
    L, H, heads, T = PRESETS[a.model]
    L, H, heads, T = a.L or L, a.H or H, a.heads or heads, a.seq or T
    Vp = (a.V + a.vpad - 1) // a.vpad * a.vpad
    if a.gb % a.mb:
        sys.exit("error: -gb must be a multiple of -mb")
    if H % heads:
        sys.exit("error: -H must be a multiple of -heads")
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    torch.manual_seed(1337)
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.dtype == "bf16"
        torch.backends.cudnn.allow_tf32 = a.dtype == "bf16"
    model = GPT(L, H, heads, T, a.V, Vp, torch_init=a.init == "torch").to(dev)
    if a.init == "llmc":
        model.init_llmc(a.seed, L, bool(a.scaled_init))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    nodecay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}]
    fused = False
    if dev == "cuda":
        try:
            opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
            fused = True
        except (TypeError, RuntimeError):
            pass
    if not fused:
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    nmicro = a.gb // a.mb
    nsteps = a.warmup_steps + a.steps
    if a.data:  # step k (0-based) = samples [k*gb, (k+1)*gb); sample i = tokens [i*T, i*T+T+1)
        tok = read_shard(a.data, nsteps * a.gb * T + 1).to(dev)
        win = tok[:-1].view(nsteps, nmicro, a.mb, T)
        nxt = tok[1:].view(nsteps, nmicro, a.mb, T)
        data = [(win[k], nxt[k]) for k in range(nsteps)]
    else:
        g = torch.Generator(device=dev).manual_seed(7)
        r = torch.randint(0, a.V, (nmicro, a.mb, T + 1), device=dev, generator=g)
        data = [(r[:, :, :-1], r[:, :, 1:])] * nsteps

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

    def step(i):  # returns the step's loss: the mean over its gb * T tokens, before the update
        opt.zero_grad(set_to_none=True)
        xs, ys = data[i]
        total = 0.0
        for k in range(nmicro):
            with torch.autocast(dev, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
                loss = fwd(xs[k], ys[k])
            (loss / nmicro).backward()
            total = total + loss.detach() / nmicro
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return total

    def timed_steps():  # (step times after the warmup, every step's loss, the last loss)
        nonlocal note
        times, losses, loss = [], [], None
        t_first = time.time()
        for i in range(nsteps):
            sync()
            t0 = time.time()
            loss = step(i)
            sync()
            losses.append(float(loss))
            dt = time.time() - t0
            if i >= a.warmup_steps:
                times.append(dt)
            if compiled and a.compile == "auto" and i == 0 and time.time() - t_first > a.compile_timeout:
                note = "first compiled step took %.0fs" % (time.time() - t_first)
        return times, losses, loss

    try:
        times, losses, loss = timed_steps()
    except Exception as e:
        if compiled and a.compile == "auto":  # a compile failure: redo eagerly
            note = "torch.compile failed (%s): eager" % type(e).__name__
            fwd, compiled = model, False
            if a.init == "llmc":  # the failed step may have updated the weights: start over
                model.init_llmc(a.seed, L, bool(a.scaled_init))
            opt.state.clear()
            times, losses, loss = timed_steps()
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
        "losses": losses, "init": a.init, "seed": a.seed, "data": a.data, "lr": a.lr, "dtype": a.dtype,
        "torch": torch.__version__, "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
        "max_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if dev == "cuda" else None, "note": note,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""PyTorch peer of `grouplin train --backend cuda` (the byte-level language model of tools/lm_model.h):
the same model, shapes and optimizer in plain PyTorch, bf16 autograd with torch._grouped_mm for the
expert GEMMs, timed on the same GPU so the two tokens-per-second figures can be set side by side.

  x      = sum_c Emb_c[byte_c]                FP32 tables [context, 256, H]
  logits = x @ Wr^T, top-k of softmax, gates renormalized     FP32 router [E, H]
  xp     = x rows sorted by expert (stable)   bf16, splits from bincount (no host sync)
  h      = grouped_mm(xp, W1^T)               W1 [E, 2F, H] (swiglu) or [E, F, H] (gelu), bf16 copy of FP32
  a      = silu(h[:, :F]) * h[:, F:]  or  gelu(h, tanh)
  yp     = grouped_mm(a, W2^T)                W2 [E, H, F]
  y      = sum_j gates[t, j] * yp[row of (t, j)]   FP32
  loss   = cross_entropy(y @ Wout^T + b, next byte)
Adam (0.9, 0.999, 1e-8, fused) on FP32 parameters, like grouplin's Adam on FP32 masters.

The data are random windows of the same text (default: every regular file under
/usr/share/common-licenses, by name; first 90 % train), drawn on the GPU.  --warmup steps run
first (not timed; with --compile they include compilation), then --steps optimizer steps are
timed with CUDA events: tokens/s = tokens * microbatches * steps / seconds.  It prints the
matching grouplin command.

--microbatches M: gradient accumulation as `grouplin train --microbatches M` runs it: M
microbatches of --tokens each, every one's loss scaled by 1/M and backpropagated (the gradients
add up), then one Adam step.  --preset mixtral|qwen3|deepseek: the expert dimensions of
`grouplin train --preset` (one MoE layer; --tokens 16384); options given explicitly override it.

usage: python3 bench/peer_torch_moe.py [--preset NAME] [--experts 64] [--hidden 1024] [--ffn 1024]
           [--topk 2] [--tokens 16384] [--microbatches 1] [--context 8] [--activation swiglu|gelu]
           [--steps 50] [--warmup 10] [--compile] [--data FILE] [--seed 1]"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

# tools/train_opts.c's presets: (hidden, ffn, experts, topk, tokens per microbatch)
PRESETS = {
    "mixtral": (4096, 14336, 8, 2, 16384),    # Mixtral-8x7B-like
    "qwen3": (2048, 768, 128, 8, 16384),      # Qwen3-30B-A3B-like
    "deepseek": (7168, 2048, 64, 8, 16384),   # DeepSeek-V3-like, 64 of its 256 experts
}
DEFAULTS = {"hidden": 1024, "ffn": 1024, "experts": 64, "topk": 2, "tokens": 16384}


def load_text(path):
    src = path or "/usr/share/common-licenses"
    if os.path.isdir(src):
        names = sorted(n for n in os.listdir(src)
                       if os.path.isfile(os.path.join(src, n)) and not os.path.islink(os.path.join(src, n)))
        data = b"".join(open(os.path.join(src, n), "rb").read() for n in names)
    else:
        data = open(src, "rb").read()
    return data, len(data) - len(data) * 10 // 100  # lm_data.c: the last 10 % validate


class MoeLm(torch.nn.Module):
    def __init__(self, a, dev):
        super().__init__()
        g = torch.Generator(device="cpu").manual_seed(a.seed)
        E, H, Fd, C = a.experts, a.hidden, a.ffn, a.context
        f1 = 2 * Fd if a.activation == "swiglu" else Fd

        def normal(*shape, std):
            return torch.nn.Parameter((torch.randn(*shape, generator=g) * std).to(dev))
        self.emb = normal(C * 256, H, std=C ** -0.5)
        self.wr = normal(E, H, std=H ** -0.5)
        self.w1 = normal(E, f1, H, std=H ** -0.5)
        self.w2 = normal(E, H, Fd, std=Fd ** -0.5)
        self.wout = normal(256, H, std=H ** -0.5)
        self.bout = torch.nn.Parameter(torch.zeros(256, device=dev))
        self.E, self.k, self.Fd, self.C, self.act = E, a.topk, Fd, C, a.activation
        self.pos = (torch.arange(C, device=dev) * 256).view(1, C)

    def forward(self, ctx, nxt):
        T, k = ctx.shape[0], self.k
        x = self.emb[ctx + self.pos].sum(1)                                  # [T, H] FP32
        probs = torch.softmax(x @ self.wr.t(), dim=-1)                       # FP32 router
        gates, experts = torch.topk(probs, k, dim=-1)
        gates = gates / gates.sum(-1, keepdim=True)
        flat = experts.flatten()
        order = torch.argsort(flat, stable=True)                             # (token, slot) by expert
        offs = torch.cumsum(torch.bincount(flat, minlength=self.E), 0).to(torch.int32)
        xp = x.to(torch.bfloat16)[order // k]
        h = torch._grouped_mm(xp, self.w1.to(torch.bfloat16).transpose(1, 2), offs=offs)
        if self.act == "swiglu":
            a = F.silu(h[:, :self.Fd]) * h[:, self.Fd:]
        else:
            a = F.gelu(h, approximate="tanh")
        yp = torch._grouped_mm(a, self.w2.to(torch.bfloat16).transpose(1, 2), offs=offs)
        back = torch.empty_like(yp).index_copy(0, order, yp)                  # row of pair (t, j)
        y = (gates.unsqueeze(-1) * back.float().view(T, k, -1)).sum(1)       # [T, H] FP32
        return F.cross_entropy(y @ self.wout.t() + self.bout, nxt)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS))
    p.add_argument("--experts", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--ffn", type=int)
    p.add_argument("--topk", type=int)
    p.add_argument("--tokens", type=int, help="tokens per microbatch")
    p.add_argument("--microbatches", type=int, default=1, help="per optimizer step (gradient accumulation)")
    p.add_argument("--context", type=int, default=8)
    p.add_argument("--activation", choices=["swiglu", "gelu"], default="swiglu")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=None)
    p.add_argument("--compile", action="store_true", help="torch.compile the model's forward")
    a = p.parse_args()
    preset = dict(zip(("hidden", "ffn", "experts", "topk", "tokens"), PRESETS[a.preset])) if a.preset else DEFAULTS
    for name, value in preset.items():
        if getattr(a, name) is None:
            setattr(a, name, value)
    if a.microbatches < 1:
        p.error("--microbatches must be >= 1")
    if not torch.cuda.is_available() or not hasattr(torch, "_grouped_mm"):
        print("peer_torch_moe: needs a CUDA GPU and a torch with torch._grouped_mm", file=sys.stderr)
        return 77
    dev = torch.device("cuda")
    torch.manual_seed(a.seed)
    data, train = load_text(a.data)
    text = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(dev).long()
    model = MoeLm(a, dev)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, fused=True)
    fwd = torch.compile(model) if a.compile else model
    window = torch.arange(-a.context, 0, device=dev).view(1, -1)

    def step():
        total = 0.0
        for _ in range(a.microbatches):                                      # gradients add up
            i = torch.randint(a.context, train, (a.tokens,), device=dev)     # targets, like lm_data.c
            loss = fwd(text[i.view(-1, 1) + window], text[i]) / a.microbatches
            loss.backward()
            total = total + loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return total                                                         # the mean over the microbatches

    t0 = time.time()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    warm = time.time() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(a.steps):
        loss = step()
    end.record()
    torch.cuda.synchronize()
    sec = start.elapsed_time(end) / 1e3
    f1 = 2 * a.ffn if a.activation == "swiglu" else a.ffn
    tokens = a.tokens * a.microbatches                           # per optimizer step
    flops = 6.0 * tokens * a.topk * a.hidden * (f1 + a.ffn)  # expert GEMMs, as grouplin train counts
    print(f"torch {torch.__version__} peer ({'compiled' if a.compile else 'eager'}, bf16 _grouped_mm): "
          f"E={a.experts} H={a.hidden} F={a.ffn} k={a.topk} {a.activation}"
          f"{f' (preset {a.preset})' if a.preset else ''}, {a.microbatches} x {a.tokens} = {tokens} tokens/step, "
          f"context {a.context}")
    print(f"  {a.steps} steps in {sec:.3f} s (after {a.warmup} warm-up steps, {warm:.1f} s): "
          f"{a.steps / sec:.2f} steps/s, {tokens * a.steps / sec:.0f} tokens/s, "
          f"{flops * a.steps / sec * 1e-9:.1f} expert GFLOP/s, last loss {loss.item():.4f} nats")
    print(f"  grouplin peer: grouplin train --backend cuda --recipes bf16 --experts {a.experts} "
          f"--hidden {a.hidden} --ffn {a.ffn} --topk {a.topk} --tokens {a.tokens} "
          f"--microbatches {a.microbatches} --context {a.context} "
          f"--activation {a.activation} --steps {a.steps + 1} --no-plot")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""PyTorch eager twin of runner-host's built-in gpt, for bench_gpu.sh.

The same layers and shapes as host/model/Gpt.cpp and TransformerBlock.cpp
(token + position embeddings, pre-norm blocks of LayerNorm, fused qkv
attention, GELU MLP of 4 x dim, LayerNorm, a bias-free head), trained with
AdamW (lr 3e-4, weight decay 0.1) on random tokens, the loss in float32.
Prints one line: `pytorch_gpt <mode> ms_per_step <ms> peak_mib <MiB>`; on
the CPU (--device cpu: bench_torch26.sh's eager single peer) followed by
`median_ms <ms> rss_mb <MB>`: the median of the measured steps, each timed
alone (the CPU runs in order: nothing to synchronise), and peak RSS.

Modes (what a PyTorch user writes):
  naive      float32, the attention written out as runner-host's 1.13 path
  sdpa       float32, F.scaled_dot_product_attention (is_causal)
  sdpa_bf16  sdpa under torch.autocast(bfloat16): AMP without a scaler
--sync reads the loss every step (loss.item()), as a loop that logs it does.
--checkpoint recomputes every unit in backward (the embeddings, each block,
the head: torch.utils.checkpoint, non-reentrant; what runner-host's
activation_checkpoint {mode: full} recomputes).

  python3 pytorch_gpt.py --block 256 --dim 768 --depth 12 --heads 12 --batch 32 --mode sdpa_bf16
"""
import argparse
import math
import os
import resource
import time

import torch
import torch.nn.functional as F
from torch import nn


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--vocab", type=int, default=256)
    a.add_argument("--block", type=int, required=True)
    a.add_argument("--dim", type=int, required=True)
    a.add_argument("--depth", type=int, required=True)
    a.add_argument("--heads", type=int, required=True)
    a.add_argument("--batch", type=int, required=True)
    a.add_argument("--mode", choices=["naive", "sdpa", "sdpa_bf16"], required=True)
    a.add_argument("--warmup", type=int, default=10)
    a.add_argument("--steps", type=int, default=40)
    a.add_argument("--device", default="cuda")
    a.add_argument("--checkpoint", action="store_true",
                   help="recompute every unit in backward (torch.utils.checkpoint)")
    a.add_argument("--sync", action="store_true",
                   help="read the loss every step (loss.item(), as a loop that logs it)")
    args = a.parse_args()
    V, T, D, H = args.vocab, args.block, args.dim, args.heads
    sdpa = args.mode.startswith("sdpa")
    if sdpa and not hasattr(F, "scaled_dot_product_attention"):
        print(f"pytorch_gpt {args.mode} unavailable (torch {torch.__version__} has no SDPA)")
        return

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def attention(self, x):
            b, t, _ = x.shape
            d = D // H
            q, k, v = self.qkv(x).view(b, t, 3, H, d).permute(2, 0, 3, 1, 4).unbind(0)
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                s = (q @ k.transpose(-2, -1)) / math.sqrt(d)
                future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
                y = s.masked_fill(future, float("-inf")).softmax(-1) @ v
            return y.transpose(1, 2).reshape(b, t, D)

        def forward(self, x):
            h = x + self.proj(self.attention(self.norm1(x)))
            return h + self.fc2(F.gelu(self.fc1(self.norm2(h))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
            self.blocks = nn.ModuleList(Block() for _ in range(args.depth))
            self.norm, self.fc = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

        def embed(self, ids):
            return self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))

        def head(self, x):
            return self.fc(self.norm(x))

        def forward(self, ids):
            if not args.checkpoint:
                x = self.embed(ids)
                for block in self.blocks:
                    x = block(x)
                return self.head(x)
            from torch.utils.checkpoint import checkpoint
            x = checkpoint(self.embed, ids, use_reentrant=False)
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=False)
            return checkpoint(self.head, x, use_reentrant=False)

    if os.environ.get("OMP_NUM_THREADS"):  # as the distributed peers do
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    torch.manual_seed(0)
    dev = torch.device(args.device)
    model = Gpt().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    ids = torch.randint(0, V, (args.batch, T + 1), device=dev)
    bf16 = args.mode.endswith("bf16")

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, V), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if args.sync:
            loss.item()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    sync()
    steps = []
    start = time.perf_counter()
    for _ in range(args.steps):
        s0 = time.perf_counter()
        step()
        steps.append(time.perf_counter() - s0)
    sync()
    ms = (time.perf_counter() - start) * 1000 / args.steps
    peak = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else float("nan")
    cpu = ""
    if dev.type == "cpu":
        steps.sort()
        n = len(steps)
        median = 1e3 * (steps[n // 2] if n % 2 else (steps[n // 2 - 1] + steps[n // 2]) / 2)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        cpu = f" median_ms {median:.2f} rss_mb {rss:.0f}"
    print(f"pytorch_gpt {args.mode}{'_sync' if args.sync else ''}{'_checkpoint' if args.checkpoint else ''} ms_per_step {ms:.2f} peak_mib {peak:.0f}{cpu}")


if __name__ == "__main__":
    main()

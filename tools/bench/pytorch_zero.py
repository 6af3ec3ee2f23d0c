"""PyTorch's own ZeRO stage 1 (torch.distributed.optim.ZeroRedundancyOptimizer
over DistributedDataParallel) on the gpt of bench_zero.sh, its peer.

Starts its own ranks (torch.multiprocessing; Gloo; Debian 12's python3-torch
1.13, where torchrun is broken, or Debian 13's 2.6, bench_torch26.sh, where
the rendezvous needs USE_LIBUV=0: peer_common.py). The model is runner-host's
built-in gpt re-written in PyTorch layer for layer (pre-norm blocks:
LayerNorm, qkv/proj attention with a causal mask, LayerNorm, fc1-GELU-fc2; a
final LayerNorm and an untied head; no dropout), same dims, per-rank batch of
random tokens, AdamW and intra-op threads. Attention as runner-host computes
it on the same torch (--attention auto): F.scaled_dot_product_attention where
torch has it (2.0+, as runner-host's LibTorch 2.x build), else written out
(matmul, mask, softmax, matmul: 1.13). pytorch_fsdp2.py imports the model.
Prints `pytorch zero1: <ms> ms/iteration, peak rss <MB> MB` on rank 0.
--ddp-only: plain AdamW over the same DistributedDataParallel, no
ZeroRedundancyOptimizer (bench_memory.sh's DDP peer); prints `pytorch ddp:
<ms> ms/iteration, peak rss <MB> MB` instead. --rss-per-rank: each rank then
prints its own peak (peer_common.rank_rss_line).
"""
import argparse
import math
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from peer_common import classic_tcpstore_without_libuv, free_port, let_gloo_workers_finish, rank_rss_line


def fused_attention(choice="auto"):
    """True for F.scaled_dot_product_attention, False for the written-out
    attention; "auto": the fused one where this torch has it (runner-host's
    rule, host/model/TransformerBlock.hpp)."""
    has = hasattr(F, "scaled_dot_product_attention")
    if choice == "sdpa" and not has:
        raise SystemExit(f"--attention sdpa: torch {torch.__version__} has no scaled_dot_product_attention")
    return has if choice == "auto" else choice == "sdpa"


class Block(nn.Module):
    def __init__(self, dim, heads, fused=False):
        super().__init__()
        self.heads = heads
        self.fused = fused
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        B, T, D = x.shape
        H, d = self.heads, D // self.heads
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, H, d).permute(2, 0, 3, 1, 4).unbind(0)
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(d)
            future = torch.ones(T, T, dtype=torch.bool).triu(1)
            y = scores.masked_fill(future, float("-inf")).softmax(-1) @ v
        h = x + self.proj(y.transpose(1, 2).reshape(B, T, D))
        return h + self.fc2(nn.functional.gelu(self.fc1(self.norm2(h))))


class Gpt(nn.Module):
    def __init__(self, vocab, block, dim, depth, heads, fused=False):
        super().__init__()
        self.token = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(block, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, fused) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.token(idx) + self.position(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


def run(rank, a):
    os.environ["RANK"] = str(rank)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.manual_seed(0)
    model = DistributedDataParallel(
        Gpt(a.vocab, a.block, a.dim, a.depth, a.heads, fused_attention(a.attention)), bucket_cap_mb=25)
    if a.ddp_only:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    else:
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,
                                      lr=1e-4, weight_decay=0.1)
    xs = torch.randint(0, a.vocab, (4, a.batch, a.block + 1))
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        opt.zero_grad(set_to_none=True)
        x = xs[i % 4]
        logits = model(x[:, :-1])
        loss = loss_fn(logits.reshape(-1, a.vocab), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()

    times = []
    for i in range(a.warmup + a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - t0)
    times = sorted(times[a.warmup:])
    ms = 1e3 * times[len(times) // 2]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if dist.get_rank() == 0:
        print(f"pytorch {'ddp' if a.ddp_only else 'zero1'}: {ms:.1f} ms/iteration, peak rss {rss:.0f} MB",
              flush=True)
    if a.rss_per_rank:
        print(rank_rss_line(dist.get_rank()), flush=True)
    let_gloo_workers_finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0, help="the rendezvous port (0: a free one)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--depth", type=int, default=16)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--attention", choices=["auto", "naive", "sdpa"], default="auto",
                   help="auto: SDPA where torch has it (2.0+), as runner-host")
    p.add_argument("--ddp-only", action="store_true",
                   help="AdamW over DDP, no ZeroRedundancyOptimizer (the DDP peer of bench_memory.sh)")
    p.add_argument("--rss-per-rank", action="store_true",
                   help="each rank prints its own peak RSS at the end (bench_memory.sh)")
    a = p.parse_args()
    fused_attention(a.attention)  # refuses sdpa on 1.13 before the ranks start
    print(classic_tcpstore_without_libuv(), file=sys.stderr, flush=True)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port or free_port())
    os.environ["WORLD_SIZE"] = str(a.ranks)
    mp.spawn(run, args=(a,), nprocs=a.ranks)

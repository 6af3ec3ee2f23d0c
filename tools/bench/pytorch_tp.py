"""PyTorch's own tensor parallelism (`parallelize_module` with
ColwiseParallel / RowwiseParallel, DTensor over Gloo on the CPU), the peer of
runner-host's `strategy: {type: ddp, tensor_parallel: {size: N}}` in
bench_tp.sh.

The model is runner-host's built-in llama layer for layer (Meta's layout,
torchtitan's names: RMSNorm, rotary embeddings on interleaved pairs,
grouped-query attention through SDPA, SwiGLU with Meta's width rule, no
biases), and the plan is torchtitan's parallelize_llama without sequence
parallel and without loss parallel: tok_embeddings RowwiseParallel over the
vocabulary (input replicated), attention wq/wk/wv ColwiseParallel and wo
RowwiseParallel, feed_forward w1/w3 ColwiseParallel and w2 RowwiseParallel,
output ColwiseParallel with its logits gathered (Replicate), norms
replicated; each rank computes n_heads / N query and n_kv_heads / N
key/value heads (the view's -1, as torchtitan's Attention). The same
shards runner-host's default plan makes. Every rank of the one TP group
trains on the same batch of random tokens; AdamW; float32.

Needs PyTorch 2.x (torch.distributed.tensor.parallel; Debian 13's 2.6):
tools/torch2_chroot.sh /usr/bin/python3 tools/bench/pytorch_tp.py ...
The ranks meet through a TCPStore without libuv where torch has none
(USE_LIBUV=0, peer_common.py).

  python3 pytorch_tp.py [--ranks 2 --iters 10 --warmup 2 --dim 512 ...]
      prints `pytorch tp: <ms> ms/iteration, peak rss <MB> MB,
      param+optimizer bytes per rank <B>` on rank 0: the median step after
      --warmup, each step timed alone after a barrier (as pytorch_fsdp2.py);
      the bytes of rank 0's local shards of the parameters and AdamW state.
  Exit 2 where torch has no tensor parallel API (1.13).
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from peer_common import classic_tcpstore_without_libuv, free_port, let_gloo_workers_finish, peak_rss_mb


def import_tp():
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    except ImportError:
        print(f"pytorch_tp: torch {torch.__version__} has no tensor parallel API "
              "(torch.distributed.tensor.parallel, PyTorch 2.x): run it with Debian 13's python3-torch 2.6 "
              "(tools/torch2_chroot.sh /usr/bin/python3 tools/bench/pytorch_tp.py ...)", file=sys.stderr)
        sys.exit(2)
    return init_device_mesh, Replicate, ColwiseParallel, RowwiseParallel, parallelize_module


def ffn_dim(dim, multiple_of, multiplier):
    hidden = int(2 * 4 * dim / 3)
    if multiplier:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


class RmsNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotate(x, cos, sin):  # x (B, T, h, hd): pairs (2i, 2i+1), as runner-host's Llama.cpp
    b, t, h, hd = x.shape
    p = x.float().reshape(b, t, h, hd // 2, 2)
    x0, x1 = p[..., 0], p[..., 1]
    c, s = cos.view(1, t, 1, hd // 2), sin.view(1, t, 1, hd // 2)
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(3).type_as(x)


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.hd = a.dim // a.heads
        self.wq = nn.Linear(a.dim, a.heads * self.hd, bias=False)
        self.wk = nn.Linear(a.dim, a.kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(a.dim, a.kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(a.heads * self.hd, a.dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = rotate(self.wq(x).view(b, t, -1, self.hd), cos, sin)  # this rank's heads
        k = rotate(self.wk(x).view(b, t, -1, self.hd), cos, sin)
        v = self.wv(x).view(b, t, -1, self.hd)
        rep = q.shape[2] // k.shape[2]
        if rep > 1:
            k = k.unsqueeze(3).expand(b, t, k.shape[2], rep, self.hd).reshape(b, t, -1, self.hd)
            v = v.unsqueeze(3).expand(b, t, v.shape[2], rep, self.hd).reshape(b, t, -1, self.hd)
        out = nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                         v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, a):
        super().__init__()
        f = ffn_dim(a.dim, a.multiple_of, a.ffn_dim_multiplier)
        self.w1 = nn.Linear(a.dim, f, bias=False)
        self.w2 = nn.Linear(f, a.dim, bias=False)
        self.w3 = nn.Linear(a.dim, f, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class Layer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.attention_norm = RmsNorm(a.dim, 1e-5)
        self.attention = Attention(a)
        self.ffn_norm = RmsNorm(a.dim, 1e-5)
        self.feed_forward = FeedForward(a)

    def forward(self, x, cos, sin):
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.tok_embeddings = nn.Embedding(a.vocab, a.dim)
        self.layers = nn.ModuleList(Layer(a) for _ in range(a.layers))
        self.norm = RmsNorm(a.dim, 1e-5)
        self.output = nn.Linear(a.dim, a.vocab, bias=False)
        hd = a.dim // a.heads
        freqs = 1.0 / a.rope_theta ** (torch.arange(0, hd, 2).float() / hd)
        angles = torch.outer(torch.arange(a.block).float(), freqs)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, ids):
        x = self.tok_embeddings(ids)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.output(self.norm(x))


def parallelize(model, ranks):
    init_device_mesh, Replicate, Colwise, Rowwise, parallelize_module = import_tp()
    mesh = init_device_mesh("cpu", (ranks,))
    parallelize_module(model, mesh, {
        "tok_embeddings": Rowwise(input_layouts=Replicate()),
        "output": Colwise(output_layouts=Replicate()),
    })
    for layer in model.layers:
        parallelize_module(layer, mesh, {
            "attention.wq": Colwise(), "attention.wk": Colwise(), "attention.wv": Colwise(),
            "attention.wo": Rowwise(),
            "feed_forward.w1": Colwise(), "feed_forward.w3": Colwise(),
            "feed_forward.w2": Rowwise(),
        })
    return model


def local_bytes(tensors):
    total = 0
    for t in tensors:
        local = t.to_local() if hasattr(t, "to_local") else t
        total += local.numel() * local.element_size()
    return total


def run(rank, a):
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.manual_seed(0)
    model = parallelize(Llama(a), a.ranks)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    g = torch.Generator().manual_seed(1000)  # every rank of the group: the same batches
    xs = torch.randint(0, a.vocab, (4, a.batch, a.block + 1), generator=g)
    times = []
    for i in range(a.warmup + a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        x = xs[i % 4]
        logits = model(x[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, a.vocab), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        loss.item()
        times.append(time.perf_counter() - t0)
    times = sorted(times[a.warmup:])
    ms = 1e3 * times[len(times) // 2]
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    held = local_bytes(list(model.parameters())) + local_bytes(state)
    rss = torch.tensor([peak_rss_mb()])
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        params = sum(math.prod(p.shape) for p in model.parameters())
        print(f"pytorch tp: {ms:.1f} ms/iteration, peak rss {rss.item():.0f} MB, "
              f"param+optimizer bytes per rank {held} ({params} parameters)", flush=True)
    let_gloo_workers_finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0, help="the rendezvous port (0: a free one)")
    p.add_argument("--ranks", type=int, default=2, help="the TP group's size (one group)")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--multiple-of", type=int, default=64)
    p.add_argument("--ffn-dim-multiplier", type=float, default=None)
    p.add_argument("--rope-theta", type=float, default=500000.0)
    a = p.parse_args()
    import_tp()  # refuses 1.13 here, before any rank starts
    print(classic_tcpstore_without_libuv(), file=sys.stderr, flush=True)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port or free_port())
    os.environ["WORLD_SIZE"] = str(a.ranks)
    mp.spawn(run, args=(a,), nprocs=a.ranks)

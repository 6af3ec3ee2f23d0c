"""PyTorch's own DistributedDataParallel on the bench job, for bench_ddp.sh.

Starts its own 2 ranks (torch.multiprocessing; Gloo; Debian 12's
python3-torch 1.13, or Debian 13's 2.6 with USE_LIBUV=0 where it has no
libuv: peer_common.py), or with --rank runs that one rank of --world-size,
meeting the others at --master-addr (bench_multinode.sh: one rank per
simulated host). Same MLP shape, per-rank batch, optimizer, bucket cap
and intra-op threads as the runner-host job; random inputs (their values do
not change the time). Prints `pytorch ddp: <ms> ms/iteration` on rank 0 (the
mean over --iters after --warmup), then `pytorch ddp median: <ms> ms/step,
peak rss <MB> MB` (the median of the same steps, each timed alone as
runner-host's `time` metric is; the largest rank's peak RSS).
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from peer_common import classic_tcpstore_without_libuv, peak_rss_mb


def run(rank, a):
    os.environ["RANK"] = str(rank)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks,
                            timeout=datetime.timedelta(seconds=120))
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.manual_seed(0)
    layers, width = [], a.in_features
    for h in a.hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, a.classes))
    model = DistributedDataParallel(nn.Sequential(*layers), bucket_cap_mb=a.bucket_cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xs = torch.randn(16, a.batch, a.in_features)
    ys = torch.randint(0, a.classes, (16, a.batch))
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[i % 16]), ys[i % 16])
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(a.warmup):
        step(i)
    dist.barrier()
    steps = []
    t0 = time.perf_counter()
    for i in range(a.iters):
        s0 = time.perf_counter()
        step(i)
        steps.append(time.perf_counter() - s0)
    dist.barrier()
    ms = 1e3 * (time.perf_counter() - t0) / a.iters
    steps.sort()
    n = len(steps)
    median = 1e3 * (steps[n // 2] if n % 2 else (steps[n // 2 - 1] + steps[n // 2]) / 2)
    rss = torch.tensor([peak_rss_mb()])
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if dist.get_rank() == 0:
        print(f"pytorch ddp: {ms:.4f} ms/iteration")
        print(f"pytorch ddp median: {median:.4f} ms/step, peak rss {rss.item():.0f} MB", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--port", type=int, default=29512)
    p.add_argument("--in-features", type=int, default=256)
    p.add_argument("--hidden", type=int, nargs="+", default=[1024, 1024])
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--bucket-cap-mb", type=float, default=25)
    p.add_argument("--rank", type=int, default=None, help="run this rank alone")
    p.add_argument("--master-addr", default="127.0.0.1")
    a = p.parse_args()
    print(classic_tcpstore_without_libuv(), file=sys.stderr, flush=True)
    os.environ["MASTER_ADDR"] = a.master_addr
    os.environ["MASTER_PORT"] = str(a.port)
    if a.rank is not None:
        run(a.rank, a)
    else:
        torch.multiprocessing.spawn(run, args=(a,), nprocs=a.ranks)


if __name__ == "__main__":
    main()

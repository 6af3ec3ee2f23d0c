"""PyTorch's FSDP2 (`fully_shard`) on the CPU (Gloo), the peer of runner-host's
fsdp strategy (sharding_strategy: full_shard) in bench_torch26.sh.

The gpt of bench_zero.sh / bench_fsdp.sh (pytorch_zero.py's model: runner-host's
built-in gpt layer for layer), same dims, per-rank batch of random tokens,
AdamW and intra-op threads. Units as torchtitan lays them out: fully_shard on
each block, then on the whole model (the root: embeddings, final norm and head),
reshard_after_forward=True (full_shard: every block gathered again in
backward), float32 throughout, FSDP2's own (implicit) prefetching.

Needs PyTorch 2.6: FSDP2's `fully_shard` is not in 1.13 (Debian 12), and before
2.6 FSDP2 ran on CUDA only. On 2.6 the CPU path has two bugs, fixed upstream
after 2.6, and Gloo's reduce-scatter sums where FSDP2 asks it to average:
three patches, applied before the model is sharded (patch_cpu_stream_events,
patch_copy_out_version_counter, patch_gloo_reduce_scatter_average below:
what, why, which upstream fix; they touch 2.6 and nothing else). With all
three, FSDP2 equals DDP bit for bit (--check-against-ddp). The ranks meet
through a TCPStore without libuv where torch has none (Debian 13's:
USE_LIBUV=0, peer_common.py).

  python3 pytorch_fsdp2.py [--iters 5 --warmup 2 ...]
      prints `pytorch fsdp2: <ms> ms/iteration, peak rss <MB> MB` on rank 0:
      the median step after --warmup, each step timed alone after a barrier
      (as pytorch_zero.py); RSS of the largest rank. With --rss-per-rank each
      rank then prints its own peak (peer_common.rank_rss_line; bench_memory.sh).
  python3 pytorch_fsdp2.py --check-against-ddp [--steps 3 --tol 5e-7 dims...]
      trains the same model from the same initial values on the same
      per-rank batches with DistributedDataParallel and with patched FSDP2
      (2 ranks) and compares every step's loss and every final parameter
      (FSDP2's gathered whole); exit 1 when a difference exceeds --tol.
  Exit codes: 0, 1 (beyond --tol), 2 (no FSDP2 for the CPU in this torch:
  1.13 is refused), 3 (FSDP2 failed: see --patches).
  python3 pytorch_fsdp2.py --check-against-ddp --patches 12   (or '', 1)
      the same with some patches left out: shows what each fixes.
"""
import argparse
import copy
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
from peer_common import (classic_tcpstore_without_libuv, free_port, let_gloo_workers_finish, peak_rss_mb,
                         rank_rss_line)
from pytorch_zero import Gpt, fused_attention


def torch_version():
    return tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


def import_fully_shard():
    """FSDP2's fully_shard: torch.distributed._composable.fsdp in 2.6 (where
    torch.distributed.fsdp also exports it), torch.distributed.fsdp later.
    Exits with a message where this torch has neither: 1.13 (Debian 12's,
    whose torch.distributed.fsdp does not even import on Python 3.11), and
    before 2.6, where FSDP2 has no CPU path."""
    refusal = (f"pytorch_fsdp2: torch {torch.__version__} has no FSDP2 fully_shard for the CPU "
               "(torch.distributed._composable.fsdp; PyTorch 2.6+, patched here): run it with "
               "Debian 13's python3-torch 2.6 (tools/torch2_chroot.sh python3 tools/bench/pytorch_fsdp2.py ...)")
    if torch_version() < (2, 6):
        print(refusal, file=sys.stderr)
        sys.exit(2)
    try:
        from torch.distributed._composable.fsdp import fully_shard
        return fully_shard
    except ImportError:
        pass
    try:
        from torch.distributed.fsdp import fully_shard
        return fully_shard
    except ImportError:
        print(refusal, file=sys.stderr)
        sys.exit(2)


def patch_cpu_stream_events():
    """Patch 1 of 2, PyTorch 2.6 only: no-op torch.cpu.Stream.record_event()
    and .wait_event(event).

    What breaks: since 2.6, FSDP2 drives its collectives through the device's
    stream API (_get_device_handle(device.type): torch.cpu on the CPU), and
    foreach_all_gather calls `all_gather_stream.record_event()`. 2.6's
    torch.cpu.Stream, a stand-in for device-agnostic code, has wait_stream()
    only, so the first forward fails with
      AttributeError: 'Stream' object has no attribute 'record_event'
    Why no-ops are right: the CPU runs every op in program order on its one
    "stream"; there is nothing to record or wait for. record_event() returns
    None, and FSDP2 skips waiting on a None event (`if event is not None`).
    Upstream: pytorch/pytorch#145935 ("[CPU Stream] Add noop for CPU stream
    record_event() and wait_event()"), after 2.6 (in 2.7): the same two no-ops.
    Returns a line for the log saying what it did."""
    stream = torch.cpu.Stream
    if hasattr(stream, "record_event") and hasattr(stream, "wait_event"):
        return "patch 1 (torch.cpu.Stream.record_event/wait_event): not needed, torch has them"
    if torch_version() != (2, 6):
        sys.exit(f"pytorch_fsdp2: torch {torch.__version__}'s CPU Stream has no record_event; "
                 "patch 1 is written for 2.6's FSDP2 only (pytorch#145935): refusing to guess")
    if not hasattr(stream, "record_event"):
        stream.record_event = lambda self, event=None: None
    if not hasattr(stream, "wait_event"):
        stream.wait_event = lambda self, event: None
    return "patch 1: torch.cpu.Stream.record_event/wait_event added as no-ops (pytorch#145935, 2.7)"


def patch_copy_out_version_counter():
    """Patch 2 of 2, PyTorch 2.6 only: the all-gather copy-out leaves the
    version counters of the gathered (unsharded) parameters as they were.

    What breaks: FSDP2 re-gathers a block before its backward (full_shard)
    into the same all-gather output tensors the unsharded parameters are
    views of, with torch.ops.fsdp.split_with_sizes_copy(..., out=...). On the
    CPU (and XPU) torch.split_with_sizes_copy bumps the version counter of
    its outputs; CUDA's fast-path kernel does not (pytorch#132014, #136303).
    Autograd saved the parameters (e.g. a Linear's weight.t()) at forward at
    version 1, finds version 2 and the first backward fails with
      RuntimeError: one of the variables needed for gradient computation has
      been modified by an inplace operation: [torch.FloatTensor [..]], which
      is output 0 of AsStridedBackward0, is at version 2; expected version 1
    Why hiding it is right: the copy writes back the very values forward used
    (the shards have not changed between forward and backward: the optimizer
    steps after backward), which is exactly what FSDP2 relies on on CUDA.
    Upstream (after 2.6; the bug: pytorch/pytorch#132014, #136303): main's
    foreach_all_gather_copy_out runs the copy under
    torch.autograd._unsafe_preserve_version_counter(tuple(outputs)), the
    tuple form #137921 added to hide a list of bumps at once (2.6's takes one
    tensor). Here the same effect around 2.6's foreach_all_gather_copy_out: every
    all-gather output keeps the version it had before the copy (0 for one the
    copy-out created, as upstream leaves it).
    Returns a line for the log saying what it did."""
    if torch_version() != (2, 6):
        return f"patch 2 (copy-out version counter): not applied, torch {torch.__version__} is not 2.6"
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives, _fsdp_param_group
    original = _fsdp_collectives.foreach_all_gather_copy_out
    if getattr(original, "_rh_patched", False):
        return "patch 2: already applied"

    def copy_out_keeping_versions(all_gather_result, fsdp_params, group):
        before = [[t._version for t in p.all_gather_outputs] for p in fsdp_params]
        original(all_gather_result, fsdp_params, group)
        for p, versions in zip(fsdp_params, before):
            for i, t in enumerate(p.all_gather_outputs):
                torch._C._autograd._unsafe_set_version_counter(t, versions[i] if i < len(versions) else 0)

    copy_out_keeping_versions._rh_patched = True
    _fsdp_collectives.foreach_all_gather_copy_out = copy_out_keeping_versions
    _fsdp_param_group.foreach_all_gather_copy_out = copy_out_keeping_versions  # the caller's name
    return "patch 2: FSDP2's all-gather copy-out keeps version counters (pytorch#132014, fixed after 2.6)"


def patch_gloo_reduce_scatter_average():
    """Patch 3 of 3, PyTorch 2.6 only: FSDP2's gradient reduce-scatter over
    Gloo sums the per-rank gradients divided by the world size (DDP's
    average) instead of asking Gloo for ReduceOp.AVG.

    What breaks (silently): for float32 gradients 2.6's
    _get_gradient_divide_factors returns (None, None), so foreach_reduce
    reduce-scatters with ReduceOp.AVG, leaving the division to the backend
    (NCCL's ncclAvg). Gloo's reduce_scatter accepts AVG and sums: every
    gradient comes out world_size times DDP's (measured here: FSDP2 / DDP =
    2.0 exactly on 2 ranks; Gloo's all_reduce refuses AVG outright). AdamW
    hides most of it (its step is nearly invariant to scaling the gradient;
    the losses of a few steps agree with DDP's to ~1e-6), SGD, a clip_grad
    or the gradient-norm metric would not, and an Adam parameter whose
    gradient is near eps moves differently (1.7e-4 after 3 steps at lr 1e-3
    on the check's small gpt).
    The fix here: for a Gloo group, factors (world size, 1): each rank's
    gradients are divided by the world size before a ReduceOp.SUM
    reduce-scatter, as DDP divides before its all-reduce (on 2 ranks both
    are exact: halving and a sum of two give the same bits in either order).
    Upstream: pytorch/pytorch#162338 ("Incorrect AVG reduction for GLOO",
    FSDP2 on the CPU; still open when this was written) and the closed
    #162344, which forced SUM plus a division for Gloo as this does;
    #149781 (after 2.6) taught Gloo's all_reduce AVG, not its reduce_scatter.
    Issue 38 named two patches; this third one is needed for FSDP2 to equal
    DDP beyond AdamW's tolerance of a scaled gradient.
    Returns a line for the log saying what it did."""
    if torch_version() != (2, 6):
        return f"patch 3 (Gloo reduce-scatter average): not applied, torch {torch.__version__} is not 2.6"
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives
    original = _fsdp_collectives._get_gradient_divide_factors
    if getattr(original, "_rh_patched", False):
        return "patch 3: already applied"

    def divide_factors(reduce_scatter_group, all_reduce_group, reduce_dtype, *args, **kwargs):
        pre, post = original(reduce_scatter_group, all_reduce_group, reduce_dtype, *args, **kwargs)
        if pre is None and dist.get_backend(reduce_scatter_group) == "gloo":
            n = reduce_scatter_group.size() * (all_reduce_group.size() if all_reduce_group is not None else 1)
            return float(n), 1.0  # divide by n, then ReduceOp.SUM (foreach_reduce's choice when pre is set)
        return pre, post

    divide_factors._rh_patched = True
    _fsdp_collectives._get_gradient_divide_factors = divide_factors
    return "patch 3: FSDP2's reduce-scatter over Gloo divides by the world size and sums (pytorch#162338)"


PATCHES = {"1": patch_cpu_stream_events, "2": patch_copy_out_version_counter,
           "3": patch_gloo_reduce_scatter_average}


def apply_patches(which="123"):
    """The patches named (all three by default), each a line for the log."""
    return [PATCHES[k]() for k in which] + [f"patch {k}: left out (--patches {which!r})"
                                            for k in PATCHES if k not in which]


def shard(model, fully_shard):
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=True)
    fully_shard(model, reshard_after_forward=True)
    return model


def batches(a, rank, n):
    g = torch.Generator().manual_seed(1000 + rank)
    return torch.randint(0, a.vocab, (n, a.batch, a.block + 1), generator=g)


def loss_of(model, x, vocab):
    logits = model(x[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, vocab), x[:, 1:].reshape(-1))


def timed(rank, a):
    fully_shard = import_fully_shard()
    for line in apply_patches(a.patches):
        if rank == 0:
            print(line, file=sys.stderr, flush=True)
    torch.manual_seed(0)
    model = shard(Gpt(a.vocab, a.block, a.dim, a.depth, a.heads, fused_attention(a.attention)), fully_shard)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    xs = batches(a, rank, 4)
    times = []
    for i in range(a.warmup + a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, xs[i % 4], a.vocab)
        loss.backward()
        opt.step()
        loss.item()
        times.append(time.perf_counter() - t0)
    times = sorted(times[a.warmup:])
    ms = 1e3 * times[len(times) // 2]
    rss = torch.tensor([peak_rss_mb()])
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"pytorch fsdp2: {ms:.1f} ms/iteration, peak rss {rss.item():.0f} MB", flush=True)
    if a.rss_per_rank:
        print(rank_rss_line(rank), flush=True)


def check_against_ddp(rank, a):
    """FSDP2 (patched) and DDP from the same initial values on the same
    batches: every step's loss and the final parameters, differences against
    --tol. Both average the gradients over 2 ranks (a/2 + b/2: halving is
    exact in binary floating point, and a sum of two is the same in either
    order), every rank computes with the same whole parameters, and AdamW
    updates elementwise (the same single-tensor code on the CPU for a DTensor
    shard as for a whole tensor), so both should give the same bits; --tol
    (default 5e-7, issue 38's figure) leaves a few float32 ulps near 1.0.
    Measured (2.6): 0, every parameter bit-equal, on a 2-block dim-64 gpt
    and on the bench's 50.7 M gpt, SDPA and written-out attention. Without
    patch 3 (--patches 12) the bench's gpt after 3 steps at lr 1e-4: losses
    1.9e-6 apart, parameters 3.4e-5 (gradients 2x DDP's; AdamW hides most
    of it)."""
    fully_shard = import_fully_shard()
    for line in apply_patches(a.patches):
        if rank == 0:
            print(line, flush=True)
    fused = fused_attention(a.attention)
    torch.manual_seed(0)
    init = copy.deepcopy(Gpt(a.vocab, a.block, a.dim, a.depth, a.heads, fused).state_dict())
    xs = batches(a, rank, a.steps)

    def train(model):
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.1)
        losses = []
        for i in range(a.steps):
            opt.zero_grad(set_to_none=True)
            loss = loss_of(model, xs[i], a.vocab)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return torch.stack(losses)

    ddp_model = Gpt(a.vocab, a.block, a.dim, a.depth, a.heads, fused)
    ddp_model.load_state_dict(init)
    ddp_losses = train(DistributedDataParallel(ddp_model, bucket_cap_mb=25))
    ddp_params = {n: p.detach().clone() for n, p in ddp_model.named_parameters()}

    fsdp_model = Gpt(a.vocab, a.block, a.dim, a.depth, a.heads, fused)
    fsdp_model.load_state_dict(init)
    shard(fsdp_model, fully_shard)
    try:
        fsdp_losses = train(fsdp_model)
    except (AttributeError, RuntimeError) as e:
        print(f"rank {rank}: FSDP2 failed (patches: '{a.patches}'): "
              f"{type(e).__name__}: {str(e).splitlines()[0][:300]}", flush=True)
        os._exit(3)
    loss_diff = (fsdp_losses - ddp_losses).abs().max()
    param_diff, worst, n_equal, n = torch.zeros(()), "", 0, 0
    for name, p in fsdp_model.named_parameters():
        whole = p.full_tensor() if hasattr(p, "full_tensor") else p  # a DTensor's whole: all-gather
        d = (whole.detach() - ddp_params[name]).abs().max()
        n += 1
        n_equal += int(torch.equal(whole.detach(), ddp_params[name]))
        if d > param_diff:
            param_diff, worst = d, name
    both = torch.stack([loss_diff, param_diff])
    dist.all_reduce(both, op=dist.ReduceOp.MAX)
    ok = bool((both <= a.tol).all())
    if rank == 0:
        print(f"fsdp2 vs ddp, 2 ranks, {a.steps} AdamW steps (lr {a.lr:g}), gpt dim {a.dim} x {a.depth} blocks "
              f"(attention: {'sdpa' if fused else 'written out'}): max |loss diff| {both[0].item():.3g}, "
              f"max |parameter diff| {both[1].item():.3g}{' (' + worst + ')' if worst else ''}; "
              f"{n_equal}/{n} parameters bit-equal on rank 0; bound {a.tol:g}: "
              f"{'OK' if ok else 'EXCEEDED'}", flush=True)
    if not ok:
        os._exit(1)


def run(rank, a):
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    (check_against_ddp if a.check_against_ddp else timed)(rank, a)
    let_gloo_workers_finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    p.add_argument("--check-against-ddp", action="store_true",
                   help="FSDP2 against DDP, same start and batches; exit 1 beyond --tol")
    p.add_argument("--steps", type=int, default=3, help="--check-against-ddp: optimizer steps")
    p.add_argument("--tol", type=float, default=5e-7, help="--check-against-ddp: the bound")
    p.add_argument("--lr", type=float, default=1e-3, help="--check-against-ddp: AdamW's lr")
    p.add_argument("--patches", default="123",
                   help="which of the three 2.6 patches to apply (default 123; '' or 12 to see what they fix)")
    p.add_argument("--no-patch", action="store_true", help="the same as --patches ''")
    p.add_argument("--rss-per-rank", action="store_true",
                   help="each rank prints its own peak RSS at the end (bench_memory.sh)")
    a = p.parse_args()
    if a.no_patch:
        a.patches = ""
    if set(a.patches) - set(PATCHES):
        p.error(f"--patches: digits of 123, not {a.patches!r}")
    import_fully_shard()  # refuses 1.13 here, before any rank starts
    fused_attention(a.attention)
    print(classic_tcpstore_without_libuv(), file=sys.stderr, flush=True)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port or free_port())
    os.environ["WORLD_SIZE"] = str(a.ranks)
    try:
        mp.spawn(run, args=(a,), nprocs=a.ranks)
    except mp.ProcessExitedException as e:  # a rank's exit code: 1 beyond --tol, 3 FSDP2 failed
        sys.exit(e.exit_code or 1)

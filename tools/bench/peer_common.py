"""What the PyTorch peers of tools/bench/ share, on PyTorch 1.13 and 2.x alike.

  classic_tcpstore_without_libuv()   call before the first init_process_group
  peak_rss_mb()                      this process's peak RSS (getrusage), MiB
  own_peak_rss_mb()                  the same of its own address space alone (VmHWM), MiB
  rank_rss_line(rank)                both, one line, for bench_memory.sh (--rss-per-rank)
  free_port()                        a free TCP port on 127.0.0.1
  let_gloo_workers_finish()          call before destroy_process_group (a 2.6 hang)
"""
import os
import resource
import socket
import time


def classic_tcpstore_without_libuv():
    """Sets USE_LIBUV=0 where this torch's TCPStore cannot use libuv.

    Since PyTorch 2.4 the TCPStore of an env:// rendezvous (init_process_group's
    default, torch.multiprocessing.spawn'ed ranks included, not only torchrun)
    asks for its libuv backend unless USE_LIBUV=0. Debian 13's python3-torch 2.6
    is built without libuv, so every rank fails with "use_libuv was requested
    but PyTorch was build without libuv support". This asks the store once (a
    throw-away master on a free port) and falls back to the classic backend
    only where libuv is missing; a USE_LIBUV already set is left alone. On 1.13
    the store has no use_libuv argument and nothing changes. Returns what it
    decided, for the log.
    """
    if "USE_LIBUV" in os.environ:
        return f"USE_LIBUV={os.environ['USE_LIBUV']} (from the environment)"
    from torch.distributed import TCPStore
    try:
        TCPStore("127.0.0.1", 0, 1, True, use_libuv=True)
    except TypeError:
        return "TCPStore without a libuv backend (this torch predates it)"
    except RuntimeError as e:
        if "libuv" not in str(e):  # e.g. no loopback here: the rendezvous will say more
            return f"TCPStore not probed ({str(e).splitlines()[0][:120]})"
        os.environ["USE_LIBUV"] = "0"
        return "USE_LIBUV=0 (this torch has no libuv: the classic TCPStore)"
    return "TCPStore with libuv"


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def own_peak_rss_mb():
    """The peak RSS of this process's own address space (VmHWM), MiB.

    ru_maxrss also counts the image the process was exec'd from: a rank that
    torch.multiprocessing.spawn started (fork or vfork, then exec) inherits
    the spawning process's high-water mark, which has torch imported
    (measured: a spawned child whose own peak was 227 MB reported 527, its
    parent's), so for a small model ru_maxrss can be the parent's figure.
    VmHWM is the rank's own.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return float("nan")


def rank_rss_line(rank):
    """`rank R: peak rss <MiB> MiB (VmHWM), ru_maxrss <MiB> MiB`: what one rank
    prints at the end with --rss-per-rank (bench_memory.sh reads it)."""
    return f"rank {rank}: peak rss {own_peak_rss_mb():.1f} MiB (VmHWM), ru_maxrss {peak_rss_mb():.1f} MiB"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def let_gloo_workers_finish():
    """Sleeps 0.1 s, the GIL released: call after the last collective, before
    destroy_process_group.

    PyTorch 2.6's ProcessGroupGloo destructor joins its worker threads with
    the GIL held (released there only since pytorch/pytorch#154976, after
    2.6). A worker that still holds the last collective's tensors needs the
    GIL to drop one whose Python object is gone (ZeroRedundancyOptimizer
    broadcasts `param.data`, a fresh alias, with async_op), and waits for it
    while the destructor waits for the worker: the rank hangs for ever
    (pytorch_zero.py with a dim-64 gpt on Debian 13's 2.6: 3 runs in 4,
    stacks in ~ProcessGroupGloo / thread::join and ~TensorImpl /
    maybe_destroy_pyobj). Asleep, the rank lets the workers take the GIL
    and finish first.
    """
    time.sleep(0.1)

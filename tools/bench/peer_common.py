"""What the PyTorch peers of tools/bench/ share, on PyTorch 1.13 and 2.x alike.

  classic_tcpstore_without_libuv()   call before the first init_process_group
  peak_rss_mb()                      this process's peak RSS (getrusage), MiB
  free_port()                        a free TCP port on 127.0.0.1
"""
import os
import resource
import socket


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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port

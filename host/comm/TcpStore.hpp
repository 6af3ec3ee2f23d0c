// c10d's TCPStore with its server backend chosen at run time. LibTorch 2.4
// and later ask for the libuv backend by default (TCPStoreOptions::useLibUV),
// and a LibTorch built without libuv (Debian 13's 2.6) then refuses every
// TCPStore, server or client, before it opens a socket: "use_libuv was
// requested but PyTorch was build without libuv support". The backend only
// decides how the server serves; clients of either speak to servers of
// either, so every process may choose on its own.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace rh::comm {

// Makes a TCPStore (server when opts.isServer) with the backend PyTorch's
// own rule picks, where this LibTorch has it:
//   USE_LIBUV=1   libuv, and an error saying so when this LibTorch lacks it;
//   USE_LIBUV=0   (or any other value) the classic backend (PyTorch's knob,
//                 read as torch.distributed's rendezvous reads it);
//   unset         libuv when this LibTorch has it (2.4+'s default), the
//                 classic backend when it was built without (found by asking
//                 once: the refusal comes before any socket is opened).
// LibTorch before 2.1 has the classic backend only. `backend` (optional,
// out): "libuv" or "classic (<why>)", for the log. Throws what c10d throws;
// a HostError (RH_ERROR_FAILED_PRECONDITION) for USE_LIBUV=1 without libuv.
//
// Every request of the new store's client then fails once the store has
// been silent for `request_timeout` (default: opts.timeout), on every
// LibTorch: 1.13's client set its socket's receive timeout from the store's
// at its first get, 2.x's sets none, so there a request to a store whose
// host went silent (its link down: no reset, no answer) never returned, and
// a lost host hung the ranks that asked the store who was lost
// (multinode.Elastic.link-down-1 on 2.6). See bound_requests.
c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(
    const std::string& host, c10d::TCPStoreOptions opts, std::string* backend = nullptr,
    std::optional<std::chrono::milliseconds> request_timeout = std::nullopt);

}  // namespace rh::comm

// `runner-host ckpt`: the checkpoint tool (docs/checkpoint-format.md).
//
//   runner-host ckpt inspect DIR
//       every logical tensor (dtype, global shape, shards, bytes); checks each
//       file through its checkpoint-IO plugin and every shard's CRC-32
//       against meta.json. Exit 0 when intact, 1 when damaged (each problem
//       named: file, tensor).
//   runner-host ckpt consolidate DIR -o model.safetensors
//       the full model weights of any checkpoint (sharded or not) as one
//       safetensors file, streamed one tensor at a time: never more than one
//       tensor in memory. Byte for byte what an unsharded save of the same
//       weights writes.
//   runner-host ckpt convert DIR --to torch -o model.pt
//       the model weights as a file Python's torch.load reads as a dict of
//       tensors (LibTorch's pickler, torch.save's zip format).
//
// The checkpoint's own checkpoint-IO plugin (meta.json's resolved job names
// it) reads the shards, found on the usual search path (--plugin-path,
// RH_PLUGIN_PATH, the install's plugin directory). Exit 2: bad usage.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "abi/StateDict.hpp"

namespace rh::host {
class HostServices;
class PluginRegistry;
}  // namespace rh::host

namespace rh::cli {

// `args` follow "ckpt" (the command first); `registry` gets its search path
// here (--plugin-path, RH_PLUGIN_PATH, beside `executable`).
int run_ckpt_tool(const std::vector<std::string>& args, const std::filesystem::path& executable,
                  host::PluginRegistry& registry, host::HostServices& services);

// A dict of whole tensors, written as torch.save writes a dict (CkptTorch.cpp:
// the only part of the tool that needs LibTorch).
void write_torch_file(const std::map<std::string, rh_StateDict::Entry>& tensors,
                      const std::filesystem::path& out);

}  // namespace rh::cli

// Strategy `single`: one process, one device, no communication.
//
// Config:
//   strategy:
//     type: single
//     device: auto   # auto (the rank's GPU when LibTorch sees one, else cpu) | cpu | cuda | cuda:N
#include <torch/cuda.h>

#include "rh/cpp/memory_estimate.hpp"
#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"

namespace {

class SingleStrategy {
 public:
  explicit SingleStrategy(const rh_CreateArgs& args) : host_(args.host) {
    rh::Config cfg(args.host, args.config);
    device_spec_ = cfg.get<std::string>("device", "auto");
    parse_device(cfg);
  }

  // --estimate-memory (ABI 1.9): the whole model, autograd's gradients, the
  // optimizer on every trainable parameter; one process whatever the world.
  void estimate_memory(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out) {
    if (args.world_size > 1) refuse_ranks(args.world_size);
    rh::estimate_whole_model(args, out);
  }

  void setup_env(rh_SetupEnvArgs& args) {
    if (args.world != nullptr && host_->Comm_Size != nullptr && host_->Comm_Size(args.world) > 1)
      refuse_ranks(host_->Comm_Size(args.world));
    args.device = device_;
    // auto / cuda: the GPU the host assigns this rank (one visible GPU per
    // rank, as srun --gpus-per-task gives, is cuda:0), from a 1.3 host.
    if (device_.device_type == kDLCUDA && (device_spec_ == "auto" || device_spec_ == "cuda") &&
        RH_STRUCT_HAS(&args, rh_SetupEnvArgs, rank_device) &&
        args.rank_device.device_type == kDLCUDA)
      args.device = args.rank_device;
  }

 private:
  [[noreturn]] static void refuse_ranks(int ranks) {
    throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                        "strategy 'single' runs one process, but this job has " +
                            std::to_string(ranks) + " ranks: use strategy 'ddp' (or zero/fsdp)");
  }

  void parse_device(const rh::Config& cfg) {
    const bool cuda_ok = torch::cuda::is_available();
    if (device_spec_ == "cpu" || (device_spec_ == "auto" && !cuda_ok)) {
      device_ = {kDLCPU, 0};
      return;
    }
    int index = 0;
    if (device_spec_ == "auto" || device_spec_ == "cuda") {
      index = 0;
    } else if (device_spec_.rfind("cuda:", 0) == 0 && device_spec_.size() > 5 &&
               device_spec_.find_first_not_of("0123456789", 5) == std::string::npos) {
      index = std::stoi(device_spec_.substr(5));
    } else {
      cfg.child("device").throw_error("expected auto, cpu, cuda or cuda:N, got '" + device_spec_ +
                                      "'");
    }
    if (!cuda_ok)
      cfg.child("device").throw_error("'" + device_spec_ +
                                      "' asked for, but LibTorch sees no CUDA device");
    if (index >= static_cast<int>(torch::cuda::device_count()))
      cfg.child("device").throw_error("'" + device_spec_ + "' asked for, but only " +
                                      std::to_string(torch::cuda::device_count()) +
                                      " CUDA device(s) exist");
    device_ = {kDLCUDA, index};
  }

  const rh_HostApi* host_;
  std::string device_spec_;
  DLDevice device_{kDLCPU, 0};
};

const rh_Component kComponents[] = {
    rh::strategy_component<SingleStrategy>(
        "single", "one process on one device (cpu or one GPU), no communication"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_strategy_single", "0.1.0", RH_NATIVE_TAG_TORCH, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)

// tp_without_data_parallel.cpp — a deliberately broken tensor-parallel
// strategy, for `runner-host conformance` (tests/host/cli/ConformanceTest.cpp),
// written against the SDK alone as a third party would: it declares a
// tensor-parallel plan (ABI 1.11) over groups of 2 consecutive ranks, the
// host runs it, but it never reduces the gradients over the data-parallel
// replicas. On 2 ranks (one replica) that is right; on 4 each replica steps
// on its own batch, and the conformance check `tensor_parallel` must fail
// on it.
//
//   strategy: {type: tp_without_data_parallel, plugin: .../librh_test_tp_without_data_parallel.so}
#include <vector>

#include "rh/cpp/config.hpp"
#include "rh/cpp/plugin.hpp"

namespace {

class TpWithoutDataParallel {
 public:
  explicit TpWithoutDataParallel(const rh_CreateArgs& args) : host_(args.host) {}
  void traits(rh_StrategyTraits& t) const { t.needs_comm = 1; }
  void setup_env(rh_SetupEnvArgs& args) {
    const int32_t n = host_->Comm_Size(args.world);
    for (int32_t g = 0; g < n / 2; ++g) {  // every group, on every rank
      const int32_t ranks[2] = {2 * g, 2 * g + 1};
      rh_Comm* group = nullptr;
      rh::check(host_, host_->Comm_NewGroup(args.world, ranks, 2, &group));
      if (group != nullptr) group_ = group;
    }
    args.device = DLDevice{kDLCPU, 0};
  }
  void tensor_parallel_plan(rh_TensorParallelPlanArgs& args) const {
    args.size = 2;
    args.group = group_;
    args.rules = rules_;
    args.num_rules = sizeof(rules_) / sizeof(rules_[0]);
  }
  // The bug: ddp's tensor_parallel all-reduces over the replicas here.
  void sync_gradients(bool) {}

 private:
  const rh_HostApi* host_;
  rh_Comm* group_ = nullptr;
  const rh_TensorParallelRule rules_[4] = {
      {RH_TENSOR_PARALLEL_RULE_STRUCT_SIZE, RH_TP_COLWISE, RH_STR("layers.*.feed_forward.w1")},
      {RH_TENSOR_PARALLEL_RULE_STRUCT_SIZE, RH_TP_COLWISE, RH_STR("layers.*.feed_forward.w3")},
      {RH_TENSOR_PARALLEL_RULE_STRUCT_SIZE, RH_TP_ROWWISE, RH_STR("layers.*.feed_forward.w2")},
      {RH_TENSOR_PARALLEL_RULE_STRUCT_SIZE, RH_TP_VOCAB, RH_STR("output")},
  };
};

const rh_Component kComponents[] = {
    rh::strategy_component<TpWithoutDataParallel>(
        "tp_without_data_parallel",
        "tensor parallel without the data-parallel reduction (conformance tests)"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_test_tp_without_data_parallel", "0.1.0", RH_NATIVE_TAG_NONE, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)

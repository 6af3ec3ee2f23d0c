// local_sgd — a third-party strategy, built out of tree against the installed
// runner-host SDK and dropped in with `strategy: {plugin: <path>, type: local_sgd}`.
//
// Local SGD: every rank steps its own copy of the model on its own data with
// no gradient communication; every `sync_every` optimizer steps the ranks
// average their parameters. (With sync_every: 1 and plain SGD this equals
// data parallel: the mean of w - lr·g_r is w - lr·mean(g).) Between syncs
// the ranks hold different parameters and a checkpoint holds rank 0's, so a
// run resumed there differs from the uninterrupted one: the divergence it
// declares to `runner-host conformance --expect-divergence`.
//
//   strategy: {plugin: /path/librh_strategy_local_sgd.so, type: local_sgd, sync_every: 4}
#include <torch/torch.h>

#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"

namespace {

class LocalSgd {
 public:
  explicit LocalSgd(const rh_CreateArgs& args) : host_(args.host) {
    rh::Config cfg(args.host, args.config);
    sync_every_ = cfg.get<int64_t>("sync_every", 4);
    if (sync_every_ < 1) cfg.child("sync_every").throw_error("must be >= 1");
  }

  // Needs the world communicator, even on one rank.
  void traits(rh_StrategyTraits& t) const { t.needs_comm = 1; }

  void setup_env(rh_SetupEnvArgs& args) {
    if (args.world == nullptr)
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION, "local_sgd needs a communicator");
    world_ = args.world;
    args.device = {kDLCPU, 0};
  }

  void wrap(const rh_WrapArgs& args) {
    model_ = args.model;
    api_ = args.model_api;
  }

  // No gradient communication at all: each rank's optimizer uses its own.
  void sync_gradients(bool) {}

  // The step counter drives the sync schedule: saved with every checkpoint
  // (strategy.steps in state.safetensors), so a resumed run syncs when the
  // uninterrupted one does.
  void state_export(rh_StateDict* dict) { rh::put_longs(host_, dict, "steps", {steps_}); }
  void state_import(const rh_StateDict* dict) {
    std::vector<int64_t> steps;
    if (rh::get_longs(host_, dict, "steps", steps, "strategy 'local_sgd'") && steps.size() == 1)
      steps_ = steps[0];
  }

  void after_optimizer_step() {
    if (++steps_ % sync_every_ != 0) return;
    const size_t n = api_->Model_NumParams(model_);
    for (size_t i = 0; i < n; ++i) {
      rh_ParamInfo info{};
      info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
      rh::check(host_, api_->Model_GetParam(model_, i, &info));
      if (!info.requires_grad) continue;
      rh::check(host_, host_->Comm_AllReduce(world_, info.data, RH_REDUCE_AVG, nullptr));
    }
  }

 private:
  const rh_HostApi* host_;
  int64_t sync_every_ = 4;
  int64_t steps_ = 0;
  rh_Comm* world_ = nullptr;
  rh_Model* model_ = nullptr;
  const rh_ModelApi* api_ = nullptr;
};

const rh_Component kComponents[] = {
    rh::strategy_component<LocalSgd>(
        "local_sgd", "local SGD: ranks step alone, parameters averaged every sync_every steps"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_example_local_sgd", "0.1.0", RH_NATIVE_TAG_TORCH, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)

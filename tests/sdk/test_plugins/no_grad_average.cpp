// no_grad_average.cpp — a deliberately broken data-parallel strategy, for
// `runner-host conformance` (tests/host/cli/ConformanceTest.cpp): it takes
// the world communicator and runs one process per rank like ddp, but
// SyncGradients does nothing, so each rank steps with its own batch's
// gradient instead of the average over ranks. The ranks drift apart and
// rank 0's checkpoint differs from ddp's: the conformance check
// `equivalence` must fail on it, naming the difference.
//
//   strategy: {type: no_grad_average, plugin: .../librh_test_no_grad_average.so}
#include "rh/cpp/config.hpp"
#include "rh/cpp/plugin.hpp"

namespace {

class NoGradAverage {
 public:
  explicit NoGradAverage(const rh_CreateArgs& args) {}
  void traits(rh_StrategyTraits& t) const { t.needs_comm = 1; }
  void setup_env(rh_SetupEnvArgs& args) { args.device = DLDevice{kDLCPU, 0}; }
  // The bug: ddp all-reduces and divides by the world size here.
  void sync_gradients(bool sync) {}
};

const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_STRATEGY, RH_STR("no_grad_average"),
     RH_STR("data parallel without the gradient average (conformance tests)"),
     &rh::StrategyAdapter<NoGradAverage>::vtable},
};

const rh_PluginInfo kInfo = {
    RH_PLUGIN_INFO_STRUCT_SIZE,
    RH_ABI_VERSION_MAJOR,
    RH_ABI_VERSION_MINOR,
    RH_STR("rh_test_no_grad_average"),
    RH_STR("0.1.0"),
    RH_NATIVE_TAG_NONE,
    kComponents,
    1,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t, uint32_t) { return &kInfo; }

// fail_on_rank.cpp — a hook that fails on one rank at one train iteration:
// how the distributed tests make "a worker that errors".
//
//   hooks: [{type: fail_on_rank, plugin: .../librh_test_fail_on_rank.so, rank: 1, iter: 3}]
#include "rh/cpp/plugin.hpp"

namespace {

class FailOnRank {
 public:
  explicit FailOnRank(const rh_CreateArgs& args) {
    rh::Config cfg(args.host, args.config);
    rank_ = cfg.get<int64_t>("rank");
    iter_ = cfg.get<int64_t>("iter", 0);
  }
  uint64_t event_mask() const { return RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_ITER); }
  void on_event(const rh_HookEventArgs& ev) {
    if (ev.state->rank == rank_ && ev.state->iter == iter_)
      throw rh::Exception(RH_ERROR_INTERNAL, "fail_on_rank: failing on purpose at rank " +
                                                 std::to_string(rank_) + ", iteration " +
                                                 std::to_string(iter_));
  }

 private:
  int64_t rank_ = 0;
  int64_t iter_ = 0;
};

const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR("fail_on_rank"),
     RH_STR("fails at one rank and iteration (fault tests)"), &rh::HookAdapter<FailOnRank>::vtable},
};

const rh_PluginInfo kInfo = {
    RH_PLUGIN_INFO_STRUCT_SIZE,
    RH_ABI_VERSION_MAJOR,
    RH_ABI_VERSION_MINOR,
    RH_STR("rh_test_fail_on_rank"),
    RH_STR("0.1.0"),
    RH_NATIVE_TAG_NONE,
    kComponents,
    1,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t, uint32_t) { return &kInfo; }

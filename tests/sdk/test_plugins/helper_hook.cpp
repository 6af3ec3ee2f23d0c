// helper_hook.cpp — one .so providing all three component kinds, written
// with the SDK's C++ helpers (rh/cpp/plugin.hpp, rh/cpp/config.hpp): the
// adapters generate the vtables and turn every exception into an rh_Error.
//
//   helper_hook      hook; `threshold` (double >= 0, default 1.0), `fail`
//                    (bool, default false: true makes Create fail with
//                    RH_ERROR_INVALID_ARGUMENT "HelperHook asked to fail");
//                    subscribes to before_run/after_run only; priority 30;
//                    `log_dirs` (bool): logs "work_dir <w>, job_dir <j>" at
//                    Create, as rh_CreateArgs gives them (job_dir: ABI 1.3).
//   helper_strategy  strategy; SetupEnv picks the CPU.
//   helper_io        checkpoint IO; Save and Load fail with
//                    RH_ERROR_UNIMPLEMENTED.
#include <string>

#include "rh/cpp/config.hpp"
#include "rh/cpp/plugin.hpp"

namespace {

class HelperHook {
 public:
  explicit HelperHook(const rh_CreateArgs& args) : host_(args.host), context_(args.context) {
    rh::Config cfg(args.host, args.config);
    threshold_ = cfg.get<double>("threshold", 1.0);
    bool fail = cfg.get<bool>("fail", false);
    if (cfg.get<bool>("log_dirs", false)) {
      std::string line = "work_dir " + std::string(args.work_dir.data, args.work_dir.size);
      if (RH_STRUCT_HAS(&args, rh_CreateArgs, job_dir))
        line += ", job_dir " + std::string(args.job_dir.data, args.job_dir.size);
      args.host->Log(args.context, RH_LOG_INFO, line.data(), line.size());
    }
    if (fail) throw rh::Exception(RH_ERROR_INVALID_ARGUMENT, "HelperHook asked to fail");
    if (threshold_ < 0) cfg.child("threshold").throw_error("must be >= 0");
  }

  uint64_t event_mask() const {
    return RH_EVENT_BIT(RH_EVENT_BEFORE_RUN) | RH_EVENT_BIT(RH_EVENT_AFTER_RUN);
  }
  int32_t priority() const { return 30; }

  void on_event(const rh_HookEventArgs& event) {
    ++events_;
    if (event.event == RH_EVENT_AFTER_RUN) {
      rh::log(host_, context_, RH_LOG_DEBUG,
              "helper_hook: threshold=" + std::to_string(threshold_) + ", " +
                  std::to_string(events_) + " events");
    }
  }

 private:
  const rh_HostApi* host_;
  rh_Context* context_;
  double threshold_ = 1.0;
  int events_ = 0;
};

class HelperStrategy {
 public:
  explicit HelperStrategy(const rh_CreateArgs& args) {
    // Reads nothing, but looks nothing up either: any key is unknown.
    (void)args;
  }
  void setup_env(rh_SetupEnvArgs& args) { args.device = DLDevice{kDLCPU, 0}; }
};

class HelperIo {
 public:
  explicit HelperIo(const rh_CreateArgs& args) { (void)args; }
  void save(const rh_CheckpointFileArgs& args) {
    throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                        "helper_io cannot save '" + rh::to_string(args.stem) + "' (test plugin)");
  }
  void load(const rh_CheckpointFileArgs& args) {
    throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                        "helper_io cannot load '" + rh::to_string(args.stem) + "' (test plugin)");
  }
};

const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR("helper_hook"),
     RH_STR("C++ helper hook (threshold, fail)"), &rh::HookAdapter<HelperHook>::vtable},
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_STRATEGY, RH_STR("helper_strategy"),
     RH_STR("C++ helper strategy (CPU, no communication)"),
     &rh::StrategyAdapter<HelperStrategy>::vtable},
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_CHECKPOINT_IO, RH_STR("helper_io"),
     RH_STR("C++ helper checkpoint IO (save/load unimplemented)"),
     &rh::CheckpointIoAdapter<HelperIo>::vtable},
};

const rh_PluginInfo kInfo = {RH_PLUGIN_INFO_STRUCT_SIZE,
                             RH_ABI_VERSION_MAJOR,
                             RH_ABI_VERSION_MINOR,
                             RH_STR("rh_test_helper_hook"),
                             RH_STR("0.1.0"),
                             RH_NATIVE_TAG_NONE,
                             kComponents,
                             sizeof(kComponents) / sizeof(kComponents[0]),
                             nullptr,
                             nullptr};

}  // namespace

extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major,
                                                         uint32_t host_abi_minor) {
  (void)host_abi_major;
  (void)host_abi_minor;
  return &kInfo;
}

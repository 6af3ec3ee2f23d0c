// comm_at_destroy.cpp — a strategy that uses the world communicator and a
// subgroup of it when it is destroyed (as a strategy waiting for its last
// collectives or freeing its buffers collectively does): the host must
// destroy strategies before the communicator they were given.
//
//   strategy: {type: comm_at_destroy, plugin: .../librh_test_comm_at_destroy.so, path: out.txt}
// Each rank appends "rank R: world barrier ok, group barrier ok" to `path`.
#include <cstdio>
#include <string>
#include <vector>

#include "rh/cpp/plugin.hpp"

namespace {

class CommAtDestroy {
 public:
  explicit CommAtDestroy(const rh_CreateArgs& args) : host_(args.host) {
    rh::Config cfg(args.host, args.config);
    path_ = cfg.get<std::string>("path");
  }
  ~CommAtDestroy() {
    if (world_ == nullptr) return;
    std::string line = "rank " + std::to_string(host_->Comm_Rank(world_)) + ": world barrier " +
                       outcome(host_->Comm_Barrier(world_)) + ", group barrier " +
                       (group_ != nullptr ? outcome(host_->Comm_Barrier(group_)) : "absent") + "\n";
    if (FILE* f = std::fopen(path_.c_str(), "a")) {
      std::fputs(line.c_str(), f);
      std::fclose(f);
    }
  }

  void traits(rh_StrategyTraits& t) const { t.needs_comm = 1; }
  void setup_env(rh_SetupEnvArgs& args) {
    world_ = args.world;
    std::vector<int32_t> all(static_cast<size_t>(host_->Comm_Size(world_)));
    for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int32_t>(r);
    rh::check(host_, host_->Comm_NewGroup(world_, all.data(), all.size(), &group_));
    args.device = DLDevice{kDLCPU, 0};
  }

 private:
  std::string outcome(rh_Error* err) const {
    if (err == nullptr) return "ok";
    host_->Error_Destroy(err);
    return "failed";
  }

  const rh_HostApi* host_;
  std::string path_;
  rh_Comm* world_ = nullptr;
  rh_Comm* group_ = nullptr;
};

const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_STRATEGY, RH_STR("comm_at_destroy"),
     RH_STR("uses the communicator in its destructor (teardown-order tests)"),
     &rh::StrategyAdapter<CommAtDestroy>::vtable},
};

const rh_PluginInfo kInfo = {
    RH_PLUGIN_INFO_STRUCT_SIZE,
    RH_ABI_VERSION_MAJOR,
    RH_ABI_VERSION_MINOR,
    RH_STR("rh_test_comm_at_destroy"),
    RH_STR("0.1.0"),
    RH_NATIVE_TAG_NONE,
    kComponents,
    1,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t, uint32_t) { return &kInfo; }

// rh/cpp/plugin.hpp and a method whose signature is slightly wrong: wrap()
// taking a non-const rh_WrapArgs& cannot be called with the const one the
// host passes. Detected by its signature alone, it would become a NULL
// vtable entry and the strategy would silently never wrap; plugin.hpp makes
// it a compile error (sdk.plugin_hpp_* in tests/sdk/CMakeLists.txt compile
// this file with and without RH_RIGHT_SIGNATURE).
#include "rh/cpp/plugin.hpp"

namespace {

class Strategy {
 public:
  explicit Strategy(const rh_CreateArgs&) {}
  void setup_env(rh_SetupEnvArgs&) {}
#ifdef RH_RIGHT_SIGNATURE
  void wrap(const rh_WrapArgs&) {}
#else
  void wrap(rh_WrapArgs&) {}
#endif
};

}  // namespace

const rh_StrategyVtable* strategy_vtable() { return &rh::StrategyAdapter<Strategy>::vtable; }

#include "abi/TypeAliases.hpp"

#include "abi/PluginRegistry.hpp"

namespace rh::host {

const std::vector<TypeAlias>& type_aliases() {
  static const std::vector<TypeAlias> aliases = {
      {RH_COMPONENT_STRATEGY, "SingleDeviceStrategy", "MMEngine's", "single", ""},
      {RH_COMPONENT_STRATEGY, "DDPStrategy", "MMEngine's", "ddp", ""},
      {RH_COMPONENT_STRATEGY, "DeepSpeedStrategy", "MMEngine's", "zero", ""},
      {RH_COMPONENT_STRATEGY, "FSDPStrategy", "MMEngine's", "fsdp", ""},
      {RH_COMPONENT_STRATEGY, "ColossalAIStrategy", "MMEngine's", "",
       "MMEngine's ColossalAIStrategy trains through Colossal-AI (its Gemini and low-level "
       "ZeRO, heterogeneous memory, hybrid parallelism); runner-host has no Colossal-AI: use "
       "zero (ZeRO stages 1-3, MMEngine's DeepSpeedStrategy) or fsdp (MMEngine's "
       "FSDPStrategy) instead"},
  };
  return aliases;
}

const TypeAlias* find_type_alias(rh_ComponentKind kind, const std::string& name) {
  for (const TypeAlias& a : type_aliases())
    if (a.kind == kind && a.name == name) return &a;
  return nullptr;
}

std::string describe_type_aliases(rh_ComponentKind kind) {
  std::string out;
  for (const TypeAlias& a : type_aliases()) {
    if (a.kind != kind) continue;
    out += (out.empty() ? a.origin + " " + kind_name(kind) + " names: " : std::string(", ")) +
           a.name + " (" + (a.target.empty() ? "refused" : a.target) + ")";
  }
  return out;
}

}  // namespace rh::host

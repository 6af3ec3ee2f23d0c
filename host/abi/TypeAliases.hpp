// Other tools' names for runner-host's component types. A job written for
// MMEngine's FlexibleRunner names its strategy by MMEngine's class
// (`strategy: {type: DeepSpeedStrategy, ...}`); the component factory reads
// such a name as runner-host's own type (zero) and logs that it did.
//
// A plugin that provides a type of the alias's very name wins over the
// alias (the name is then the plugin's, like any other type): a `plugin:`
// library providing it, a loaded library providing it, or a library of
// that file name on the search path (librh_strategy_DeepSpeedStrategy.so).
// An alias is a convenience for recipes written elsewhere; it must not take
// a type away from a plugin somebody installed under that name, and the
// log line says which one a job got.
#pragma once

#include <string>
#include <vector>

#include "rh/rh_plugin.h"

namespace rh::host {

struct TypeAlias {
  rh_ComponentKind kind;
  std::string name;     // "DeepSpeedStrategy"
  std::string origin;   // "MMEngine's"
  std::string target;   // "zero"; empty when the name is refused
  std::string refusal;  // when `target` is empty: what it is and what to use instead
};

// Every alias, in a fixed order (for messages and --list-plugins).
const std::vector<TypeAlias>& type_aliases();

// The alias `name` of `kind`, or nullptr.
const TypeAlias* find_type_alias(rh_ComponentKind kind, const std::string& name);

// "MMEngine's strategy names: SingleDeviceStrategy (single), ..."; empty
// when `kind` has no alias.
std::string describe_type_aliases(rh_ComponentKind kind);

}  // namespace rh::host

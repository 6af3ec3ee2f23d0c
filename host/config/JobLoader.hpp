// Loading a job: the YAML file, its `_base_` includes and the --set overrides,
// merged into one tree.
//
//   _base_: [../base/default_runtime.yaml, ../models/mlp.yaml]   # relative to this file
//   optim_wrapper:
//     optimizer: {type: AdamW, lr: 3.0e-4}
//   param_scheduler:
//     _delete_: true          # replace the base's value instead of merging into it
//     type: CosineAnnealingLR
//
// Bases merge in order, then the file's own keys over them: maps merge key by
// key, anything else (scalars, lists, null) replaces; a map holding
// `_delete_: true` replaces. `_base_` and `_delete_` are gone from the result.
// Then each `--set key.path=value` applies in order. Every node keeps the
// Location it was written at (override nodes: file "--set 'key.path=value'",
// line 0) and the path() it has in the final tree.
#pragma once

#include <string>
#include <vector>

#include "config/ConfigNode.hpp"
#include "config/YamlWriter.hpp"  // to_yaml(), for --print-config

namespace rh::config {

struct Job {
  NodePtr root;                    // a map
  std::vector<std::string> files;  // every YAML file read, the main one first, each once
};

// Loads `path`, resolves `_base_` includes recursively, then applies each --set
// argument in order. Throws ConfigError (what() shown, <f> = file:line:col):
//   job.yaml: cannot read file: <strerror>
//   <f>: YAML syntax error: <parser message>
//   <f>: the job file must be a map of keys, got a list
//   <f>: _base_.1: cannot read included file 'x.yaml' (resolved to /abs/x.yaml): <strerror>
//   <f>: _base_: include cycle: a.yaml -> b.yaml -> a.yaml
//   <f>: _base_: expected a file name or a list of file names, got a map
//   <f>: a._delete_: expected a boolean, got 'yes'
// plus the apply_set() errors below.
Job load_job(const std::string& path, const std::vector<std::string>& set_args);

// Applies one `key.path=value` override to `root` (a map) and reassigns paths.
// The value is parsed as YAML: `3e-4` a number, `[1,2]` a list, `{a: 1}` a map,
// `'x'` a string, nothing = null. Digit segments index lists (`hooks.0.interval=5`);
// missing maps on the way are created (and a null on the way becomes a map).
// Throws ConfigError:
//   --set: expected key.path=value, got 'xyz'
//   --set 'a..b=1': expected key.path=value, got 'a..b=1' (empty key segment)
//   --set 'a.b=1': a: cannot set 'a.b': 'a' is an integer, not a map
//   --set 'h.5.x=1': h: cannot set 'h.5.x': index 5 is out of range, 'h' has 2 items
//   --set 'h.x=1': h: cannot set 'h.x': 'h' is a list, 'x' is not an item index
//   --set 'a=[1': a: cannot parse the value: YAML syntax error: <message> (column 1)
void apply_set(Node& root, const std::string& set_arg);

}  // namespace rh::config

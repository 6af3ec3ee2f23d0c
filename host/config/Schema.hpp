// A small declarative schema for the config tree, and its validator.
//
//   Schema train_cfg = schema::map({
//       {"by_epoch", schema::boolean()},
//       {"max_epochs", schema::integer(1)},
//   });
//   for (const ConfigError& e : validate(*job.root, job_schema())) std::cerr << e.what() << '\n';
//
// validate() reports every error it finds, in file order, each located where
// the fix goes (an unknown key at the key, a missing key at its parent map):
//   train.yaml:7:3: train_cfg.max_epoch: unknown key (did you mean 'max_epochs'?)
//   train.yaml:8:11: train_cfg.val_interval: expected an integer, got 'abc'
//   train.yaml:9:15: seed: must be >= 0, got -1
//   train.yaml:3:3: model: missing required key 'type'
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/ConfigNode.hpp"

namespace rh::config {

class Schema {
 public:
  struct Impl;  // defined in Schema.cpp

  Schema();  // any(): accepts everything
  explicit Schema(std::shared_ptr<const Impl> impl);

  // What this schema accepts, for "expected ..." messages: "an integer", "a map",
  // "one of a, b, c", or the `expected` text of one_of().
  std::string describe() const;
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

namespace schema {

Schema integer(std::optional<int64_t> min = {}, std::optional<int64_t> max = {});
Schema number(std::optional<double> min = {}, std::optional<double> max = {});  // ints too
Schema number_above(double exclusive_min, std::optional<double> max = {});      // "must be > 0"
Schema boolean();
Schema string();  // any scalar
Schema enumeration(std::vector<std::string> choices);
Schema any();
Schema list(Schema item);

struct Field {
  // A constructor rather than an aggregate, so `{"seed", integer(0)}` leaves out
  // `required` and `doc` without -Wmissing-field-initializers.
  Field() = default;
  Field(std::string name_, Schema schema_, bool required_ = false, std::string doc_ = {})
      : name(std::move(name_)),
        schema(std::move(schema_)),
        required(required_),
        doc(std::move(doc_)) {}

  std::string name;
  Schema schema;
  bool required = false;
  std::string doc;
};

// Unknown keys are errors, with "did you mean" from the field names.
Schema map(std::vector<Field> fields);
// Known fields are checked, other keys are left to a plugin or builder.
Schema open_map(std::vector<Field> fields);
// The first alternative that validates wins; otherwise the errors of the one
// alternative that matches the value's shape (an integer for integer(), a map for
// map(), ...), or "expected <expected>, got ..." when none or several do.
Schema one_of(std::vector<Schema> alternatives, std::string expected);
Schema nullable(Schema s);
// Open map: `type` required string, `plugin` optional string (a path) and, if
// with_priority, `priority`: an integer 0..100 or HIGHEST, VERY_HIGH, HIGH,
// ABOVE_NORMAL, NORMAL, BELOW_NORMAL, LOW, VERY_LOW, LOWEST.
Schema plugin_spec(bool with_priority);
// A map whose `key` selects the schema of the rest; `key` itself counts as a known,
// required field. Unknown type: "unknown <what> type 'x'; choices: a, b, c (did you mean 'b'?)".
Schema typed_union(std::string key, std::map<std::string, Schema> by_type, std::string what);

// The named priority levels plugin_spec() accepts, highest first, with their values.
const std::vector<std::pair<std::string, int>>& priority_levels();

}  // namespace schema

std::vector<ConfigError> validate(const Node& root, const Schema& schema);

// Every key path a schema accepts, in field order, each once: nested maps as
// "a.b", list items as "a[].b", a typed union's variants' keys with the
// variant in `variants` ("optim_wrapper.optimizer.lr": "SGD, Adam, AdamW").
// The guard of docs/config-keys.md (tests/host/job/ConfigKeysDocTest.cpp).
struct SchemaKey {
  std::string path;
  std::string doc;       // the first non-empty doc of the field
  std::string variants;  // the typed-union types that accept it ("" for all)
};
std::vector<SchemaKey> schema_keys(const Schema& schema);

}  // namespace rh::config

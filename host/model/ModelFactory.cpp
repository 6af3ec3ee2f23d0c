// build_model(): validates the `model:` map against model_schema() (so a
// direct call gets the same errors as the job validator) and hands it to the
// builder of its `type`.
#include <functional>
#include <map>

#include "config/Schema.hpp"
#include "model/ModelBuilders.hpp"
#include "model/ModelSchema.hpp"

namespace rh::model {

std::unique_ptr<Model> build_model(const config::Node& cfg, uint64_t seed,
                                   const std::string& job_dir) {
  std::vector<config::ConfigError> errors = config::validate(cfg, model_schema());
  if (!errors.empty()) throw errors.front();

  using Builder = std::function<std::unique_ptr<Model>(const config::Node&)>;
  const std::map<std::string, Builder> builders = {
      {"mlp", [&](const config::Node& c) { return make_mlp(c, seed); }},
      {"convnet", [&](const config::Node& c) { return make_convnet(c, seed); }},
      {"vit", [&](const config::Node& c) { return make_vit(c, seed); }},
      {"gpt", [&](const config::Node& c) { return make_gpt(c, seed); }},
      {"torchscript", [&](const config::Node& c) { return make_torchscript(c, job_dir); }},
  };
  // validate() has checked that `type` is one of these.
  return builders.at(cfg.find("type")->scalar())(cfg);
}

}  // namespace rh::model

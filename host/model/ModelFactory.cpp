// build_model(): validates the `model:` map against model_schema() (so a
// direct call gets the same errors as the job validator) and hands it to the
// builder of its `type`.
#include <algorithm>
#include <functional>
#include <map>

#include "config/Schema.hpp"
#include "model/ModelBuilders.hpp"
#include "model/ModelSchema.hpp"
#include "model/ParamRegistry.hpp"

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
      {"llama", [&](const config::Node& c) { return make_llama(c, seed); }},
      {"torchscript", [&](const config::Node& c) { return make_torchscript(c, job_dir); }},
  };
  // validate() has checked that `type` is one of these.
  std::unique_ptr<Model> model = builders.at(cfg.find("type")->scalar())(cfg);
  if (const config::Node* frozen = cfg.find("frozen")) freeze(*model, *frozen);
  return model;
}

std::unique_ptr<Model> build_model_shapes(const config::Node& cfg, const std::string& job_dir) {
  const ParamRegistry::ShapesOnlyScope shapes_only;
  return build_model(cfg, /*seed=*/0, job_dir);  // nothing is drawn: the seed is not used
}

void freeze(Model& model, const config::Node& prefixes) {
  std::vector<NamedTensor> params = model.named_parameters();
  for (const auto& item : prefixes.seq_items()) {
    const std::string prefix = item->as_string();
    size_t matched = 0;
    for (auto& p : params) {
      const bool match = p.name == prefix || (p.name.size() > prefix.size() &&
                                              p.name.compare(0, prefix.size(), prefix) == 0 &&
                                              p.name[prefix.size()] == '.');
      if (!match) continue;
      p.tensor.requires_grad_(false);
      ++matched;
    }
    if (matched > 0) continue;
    // Name what exists: the top-level modules, in registration order.
    std::vector<std::string> tops;
    for (const auto& p : params) {
      const std::string top = p.name.substr(0, p.name.find('.'));
      if (std::find(tops.begin(), tops.end(), top) == tops.end()) tops.push_back(top);
    }
    std::string list;
    for (const auto& t : tops) list += (list.empty() ? "" : ", ") + t;
    throw config::ConfigError(item->location(), item->path(),
                              "'" + prefix +
                                  "' matches no parameter of the model (a prefix of "
                                  "parameter names such as 'blocks.0'; its top-level modules: " +
                                  list + ")");
  }
}

}  // namespace rh::model

// One builder per model type, each defined in the type's file (Mlp.cpp,
// ConvNet.cpp, Vit.cpp, Gpt.cpp, Llama.cpp, TorchScriptModel.cpp); build_model()
// (ModelFactory.cpp) validates the config and picks one by `type`. `cfg` is
// the validated `model:` map.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/Model.hpp"

namespace rh::model {

std::unique_ptr<Model> make_mlp(const config::Node& cfg, uint64_t seed);
std::unique_ptr<Model> make_convnet(const config::Node& cfg, uint64_t seed);
std::unique_ptr<Model> make_vit(const config::Node& cfg, uint64_t seed);
std::unique_ptr<Model> make_gpt(const config::Node& cfg, uint64_t seed);
std::unique_ptr<Model> make_llama(const config::Node& cfg, uint64_t seed);
// Keeps the file's weights: the seed does not apply.
std::unique_ptr<Model> make_torchscript(const config::Node& cfg, const std::string& job_dir);

}  // namespace rh::model

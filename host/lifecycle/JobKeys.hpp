// Finding a validated job's subtree by dotted path ("optim_wrapper.clip_grad"),
// for the code that hands it to its owner or names it in a message. Values
// the host reads are typed fields of config::JobSettings (job/JobSettings.hpp),
// read once, not looked up by string.
#pragma once

#include <string>

#include "config/ConfigNode.hpp"

namespace rh::lifecycle {

// The node at `path`, or nullptr.
const config::Node* find_key(const config::Node& root, const std::string& path);

}  // namespace rh::lifecycle

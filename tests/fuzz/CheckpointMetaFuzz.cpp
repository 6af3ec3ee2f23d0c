#include "FuzzEntries.hpp"
#include "abi/HostError.hpp"
#include "checkpoint/CheckpointStore.hpp"

namespace rh::fuzz {

void checkpoint_meta(const uint8_t* data, size_t size) {
  const std::string dir = scratch_dir();
  write_file(dir + "/meta.json", data, size);
  try {
    (void)checkpoint::read_meta(dir);
  } catch (const host::HostError&) {
    // DATA_LOSS naming meta.json: what read_meta promises.
  }
}

}  // namespace rh::fuzz

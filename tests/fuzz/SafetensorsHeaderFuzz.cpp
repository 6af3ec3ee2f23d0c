#include <string_view>

#include "FuzzEntries.hpp"
#include "formats/SafetensorsHeader.hpp"
#include "rh/cpp/error.hpp"

namespace rh::fuzz {

void safetensors_header(const uint8_t* data, size_t size) {
  if (size < 8) return;
  uint64_t file_size = 0;
  for (int i = 7; i >= 0; --i) file_size = file_size << 8 | data[i];
  const std::string_view json(reinterpret_cast<const char*>(data) + 8, size - 8);
  try {
    const safetensors::Header header = safetensors::decode_header(json, file_size);
    // What decode_header accepted, encode_header must be able to write.
    (void)safetensors::encode_header(header);
  } catch (const rh::Exception&) {
    // Rejected with a message: what decode_header promises.
  }
}

}  // namespace rh::fuzz

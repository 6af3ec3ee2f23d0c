// rh/cpp/crc32.hpp — CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320):
// the checksum of zlib, gzip and PNG, so Python's zlib.crc32 computes the
// same value. Slice-by-8, header-only. The checkpoint files
// (safetensors __metadata__) and the host's meta.json (every shard,
// docs/checkpoint-format.md) use it, so a shard can be checked against
// either.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rh {
namespace detail {

using Crc32Tables = std::array<std::array<uint32_t, 256>, 8>;

// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC of
// byte b followed by k zero bytes, which lets the loop fold 8 bytes at once.
constexpr Crc32Tables make_crc32_tables() {
  Crc32Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  return t;
}

inline constexpr Crc32Tables kCrc32Tables = make_crc32_tables();

}  // namespace detail

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the 8-byte fold reads little endian");

// Continues a running checksum, zlib style: start with crc32_update(0, ...)
// and feed the result of each call into the next.
inline uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  const auto& t = detail::kCrc32Tables;
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  while (size >= 8) {
    uint32_t lo = 0;
    uint32_t hi = 0;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFFu] ^ t[2][(hi >> 8) & 0xFFu] ^ t[1][(hi >> 16) & 0xFFu] ^ t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size-- > 0) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFFu];
  return ~c;
}

}  // namespace rh

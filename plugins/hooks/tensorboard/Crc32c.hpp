// CRC-32C (Castagnoli), as TFRecord framing uses it, and TFRecord's mask.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rh::tfrecord {

// The CRC-32C of `size` bytes at `data` (reflected polynomial 0x82F63B78,
// initial and final XOR 0xFFFFFFFF): crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t size);

// TFRecord stores masked CRCs: a CRC of data that itself holds CRCs is
// otherwise prone to collisions (tensorflow/core/lib/hash/crc32c.h).
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace rh::tfrecord

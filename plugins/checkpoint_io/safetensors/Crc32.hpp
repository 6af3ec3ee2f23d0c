// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320): the checksum of zlib,
// gzip and PNG, so Python's zlib.crc32 computes the same value. Slice-by-8.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rh::ckpt {

// Continues a running checksum, zlib style: start with crc32_update(0, ...)
// and feed the result of each call into the next.
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

}  // namespace rh::ckpt

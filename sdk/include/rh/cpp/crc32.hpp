// rh/cpp/crc32.hpp — CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320):
// the checksum of zlib, gzip and PNG, so Python's zlib.crc32 computes the
// same value. Header-only: on x86-64 CPUs with PCLMULQDQ (checked at run
// time) blocks of 64 bytes are folded with carry-less multiplication (the
// method of Intel's white paper "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ", with the constants of Linux's
// crc32-pclmul), about 10x faster; slice-by-8 otherwise and for the tail.
// The checkpoint files
// (safetensors __metadata__) and the host's meta.json (every shard,
// docs/checkpoint-format.md) use it, so a shard can be checked against
// either.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define RH_CRC32_PCLMUL 1
#endif

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

// Slice-by-8 on the inverted register (zlib's convention inside crc32()).
inline uint32_t crc32_slice8(uint32_t c, const unsigned char* p, size_t size) {
  const auto& t = kCrc32Tables;
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
  return c;
}

#ifdef RH_CRC32_PCLMUL
#define RH_CRC32_TARGET __attribute__((target("pclmul,sse4.1")))
RH_CRC32_TARGET inline __m128i crc32_load(const unsigned char* q) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
}
// acc folded over 128 bits (constants k) and `next` added.
RH_CRC32_TARGET inline __m128i crc32_fold(__m128i acc, __m128i k, __m128i next) {
  const __m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x11), next), lo);
}

// `size` >= 64 and a multiple of 16; `c` the inverted register. Folds four
// 128-bit lanes over 64-byte blocks, then to one lane, to 64 bits, and a
// Barrett reduction to 32.
RH_CRC32_TARGET inline uint32_t crc32_pclmul(uint32_t c, const unsigned char* p, size_t size) {
  alignas(16) static const uint64_t k1k2[] = {0x0154442bd4, 0x01c6e41596};
  alignas(16) static const uint64_t k3k4[] = {0x01751997d0, 0x00ccaa009e};
  alignas(16) static const uint64_t k5k0[] = {0x0163cd6124, 0x0000000000};
  alignas(16) static const uint64_t poly[] = {0x01db710641, 0x01f7011641};
  __m128i x1 = _mm_xor_si128(crc32_load(p), _mm_cvtsi32_si128(static_cast<int>(c)));
  __m128i x2 = crc32_load(p + 16), x3 = crc32_load(p + 32), x4 = crc32_load(p + 48);
  __m128i x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  p += 64;
  size -= 64;
  while (size >= 64) {
    x1 = crc32_fold(x1, x0, crc32_load(p));
    x2 = crc32_fold(x2, x0, crc32_load(p + 16));
    x3 = crc32_fold(x3, x0, crc32_load(p + 32));
    x4 = crc32_fold(x4, x0, crc32_load(p + 48));
    p += 64;
    size -= 64;
  }
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  x1 = crc32_fold(crc32_fold(crc32_fold(x1, x0, x2), x0, x3), x0, x4);
  while (size >= 16) {
    x1 = crc32_fold(x1, x0, crc32_load(p));
    p += 16;
    size -= 16;
  }
  // 128 -> 64 bits.
  x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
  x3 = _mm_setr_epi32(~0, 0, ~0, 0);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
  x0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  x2 = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, x3), x0, 0x00), x2);
  // Barrett reduction to 32 bits.
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, x3), x0, 0x10);
  x2 = _mm_clmulepi64_si128(_mm_and_si128(x2, x3), x0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

inline bool cpu_has_pclmul() {
  static const bool has = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return has;
}
#endif

}  // namespace detail

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the 8-byte fold reads little endian");

// Continues a running checksum, zlib style: start with crc32_update(0, ...)
// and feed the result of each call into the next.
inline uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
#ifdef RH_CRC32_PCLMUL
  if (size >= 64 && detail::cpu_has_pclmul()) {
    const size_t blocks = size & ~size_t{15};
    c = detail::crc32_pclmul(c, p, blocks);
    p += blocks;
    size -= blocks;
  }
#endif
  return ~detail::crc32_slice8(c, p, size);
}

}  // namespace rh

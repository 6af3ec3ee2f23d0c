// The safetensors header: what it describes, how it is written and how a
// header read from a file is checked. No I/O and no host calls here: the
// safetensors checkpoint-IO plugin, `runner-host ckpt consolidate` (which
// streams a file one tensor at a time) and the fuzz tests share it.
//
// File layout (https://github.com/huggingface/safetensors, "Format"):
//
//   [8 bytes]  N, little-endian uint64: the size of the JSON header
//   [N bytes]  JSON: {"__metadata__": {string: string, ...},
//                     "<tensor>": {"dtype": "F32", "shape": [2, 3],
//                                  "data_offsets": [begin, end]}, ...}
//              padded with spaces so that 8 + N is a multiple of 8
//   [rest]     the data section: every tensor's bytes, C order, little endian;
//              data_offsets are relative to its start and tile it exactly
//
// What runner-host adds, all inside `__metadata__` (string values, so any
// safetensors reader ignores them):
//   "format": "pt"               what transformers/safetensors expect for torch
//   "checksum": "crc32"          every tensor has a checksum entry
//   "crc32:<tensor>": "1a2b3c4d" CRC-32 (zlib's) of the tensor's bytes, 8 hex digits
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rh::safetensors {

// One safetensors dtype and the DLPack type it maps to (lanes = 1).
struct Dtype {
  std::string_view name;  // "F32"
  uint8_t code;           // DLDataTypeCode
  uint8_t bits;
  size_t bytes() const { return bits / 8u; }
};

// kDLBool in DLPack >= 0.8; the 0.6 headers Debian ships do not name it.
constexpr uint8_t kDLBoolCode = 6;

// nullptr when `name` is not a dtype runner-host reads.
const Dtype* dtype_by_name(std::string_view name);
// nullptr when `type` has no safetensors dtype (complex, lanes > 1, ...).
const Dtype* dtype_of(DLDataType type);
// "F64, F32, F16, BF16, ..." for messages.
std::string supported_dtypes();
// "F32 [2, 3]" for messages.
std::string describe(const Dtype& dtype, const std::vector<uint64_t>& shape);

struct TensorEntry {
  std::string name;
  const Dtype* dtype = nullptr;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the data section
  uint64_t end = 0;
  std::optional<uint32_t> crc32;

  uint64_t size() const { return end - begin; }
};

struct Header {
  // `__metadata__` without the checksum entries, in the order written.
  std::vector<std::pair<std::string, std::string>> metadata;
  // In data order (ascending data_offsets).
  std::vector<TensorEntry> tensors;
  bool checksummed = false;  // "checksum": "crc32"
};

// Largest header runner-host reads or writes (safetensors' own limit).
constexpr uint64_t kMaxHeaderSize = 100'000'000;
// Most dimensions a tensor may have, read or written (a header listing
// millions of dimensions would otherwise be accepted and handed on).
constexpr int kMaxDims = 64;

// The JSON header padded with spaces to a multiple of 8 bytes. Tensor
// entries follow h.tensors' order; every tensor with a crc32 gets its
// "crc32:<name>" entry, and "checksum": "crc32" is written when they all do.
std::string encode_header(const Header& h);
// The first 8 + N bytes of a file: the header's length (little endian) and
// the encoded header itself.
std::string file_start(const std::string& encoded_header);

// Parses and checks a header read from a file of `file_size` bytes whose
// header length field said `json.size()`. Throws rh::Exception
// (RH_ERROR_DATA_LOSS for a damaged file, RH_ERROR_UNIMPLEMENTED for a
// dtype runner-host does not read) with a message that does not name the
// file (the caller prefixes it).
Header decode_header(std::string_view json, uint64_t file_size);

}  // namespace rh::safetensors

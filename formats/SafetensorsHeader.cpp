#include "formats/SafetensorsHeader.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "formats/Json.hpp"
#include "rh/cpp/error.hpp"

#if defined(DLPACK_VERSION) && DLPACK_VERSION >= 80
static_assert(static_cast<int>(kDLBool) == rh::safetensors::kDLBoolCode, "DLPack's kDLBool moved");
#endif

namespace rh::safetensors {
namespace {

constexpr std::array<Dtype, 13> kDtypes = {{
    {"F64", kDLFloat, 64},
    {"F32", kDLFloat, 32},
    {"F16", kDLFloat, 16},
    {"BF16", kDLBfloat, 16},
    {"I64", kDLInt, 64},
    {"I32", kDLInt, 32},
    {"I16", kDLInt, 16},
    {"I8", kDLInt, 8},
    {"U64", kDLUInt, 64},
    {"U32", kDLUInt, 32},
    {"U16", kDLUInt, 16},
    {"U8", kDLUInt, 8},
    {"BOOL", kDLBoolCode, 8},
}};

constexpr std::string_view kChecksumKey = "checksum";
constexpr std::string_view kCrcPrefix = "crc32:";

[[noreturn]] void data_loss(const std::string& message) {
  throw Exception(RH_ERROR_DATA_LOSS, message);
}

std::string quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

std::string hex8(uint32_t v) {
  static const char* kHex = "0123456789abcdef";
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kHex[v & 15u];
  return s;
}

std::optional<uint32_t> parse_hex8(std::string_view s) {
  if (s.size() != 8) return std::nullopt;
  uint32_t v = 0;
  for (char c : s) {
    uint32_t d = 0;
    if (c >= '0' && c <= '9') {
      d = static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<uint32_t>(c - 'a' + 10);
    } else {
      return std::nullopt;
    }
    v = (v << 4) | d;
  }
  return v;
}

std::string range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// One tensor entry of the JSON: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}.
TensorEntry decode_tensor(const std::string& name, const json::Value& v) {
  const std::string what = "tensor " + quoted(name);
  if (!v.is_object()) {
    data_loss(what + ": expected an object, got " + v.kind_name());
  }
  for (const json::Member& member : v.members) {
    if (member.key != "dtype" && member.key != "shape" && member.key != "data_offsets")
      data_loss(what + ": unexpected key \"" + member.key +
                "\" (expected dtype, shape, data_offsets)");
  }
  const json::Value* dtype = v.find("dtype");
  const json::Value* shape = v.find("shape");
  const json::Value* offsets = v.find("data_offsets");
  if (dtype == nullptr || shape == nullptr || offsets == nullptr)
    data_loss(what + ": missing " +
              (dtype == nullptr   ? "dtype"
               : shape == nullptr ? "shape"
                                  : "data_offsets"));

  TensorEntry t;
  t.name = name;
  if (!dtype->is_string()) data_loss(what + ": dtype must be a string");
  t.dtype = dtype_by_name(dtype->text);
  if (t.dtype == nullptr) {
    throw Exception(RH_ERROR_UNIMPLEMENTED,
                    what + ": dtype '" + dtype->text +
                        "' is not supported (supported: " + supported_dtypes() + ")");
  }
  if (!shape->is_array()) data_loss(what + ": shape must be an array");
  if (shape->items.size() > static_cast<size_t>(kMaxDims))
    data_loss(what + ": shape has " + std::to_string(shape->items.size()) +
              " dimensions, more than the " + std::to_string(kMaxDims) + " this reader accepts");
  uint64_t numel = 1;
  for (const json::Value& d : shape->items) {
    const std::optional<uint64_t> size = d.as_uint64();
    if (!size) data_loss(what + ": shape must hold non-negative integers");
    t.shape.push_back(*size);
    if (__builtin_mul_overflow(numel, *size, &numel))
      data_loss(what + ": shape " + describe(*t.dtype, t.shape) + " is too large");
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(numel, t.dtype->bytes(), &bytes))
    data_loss(what + ": shape " + describe(*t.dtype, t.shape) + " is too large");
  if (!offsets->is_array() || offsets->items.size() != 2 || !offsets->items[0].as_uint64() ||
      !offsets->items[1].as_uint64())
    data_loss(what + ": data_offsets must be two non-negative integers [begin, end]");
  t.begin = *offsets->items[0].as_uint64();
  t.end = *offsets->items[1].as_uint64();
  if (t.end < t.begin) {
    data_loss(what + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
              "] are out of range: the end lies before the begin");
  }
  if (t.size() != bytes) {
    data_loss(what + ": data_offsets " + range(t.begin, t.end) + " hold " +
              std::to_string(t.size()) + " bytes, but " + describe(*t.dtype, t.shape) + " needs " +
              std::to_string(bytes));
  }
  return t;
}

}  // namespace

const Dtype* dtype_by_name(std::string_view name) {
  for (const Dtype& d : kDtypes)
    if (d.name == name) return &d;
  return nullptr;
}

const Dtype* dtype_of(DLDataType type) {
  if (type.lanes != 1) return nullptr;
  for (const Dtype& d : kDtypes)
    if (d.code == type.code && d.bits == type.bits) return &d;
  return nullptr;
}

std::string supported_dtypes() {
  std::string out;
  for (const Dtype& d : kDtypes) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

std::string describe(const Dtype& dtype, const std::vector<uint64_t>& shape) {
  std::string out = std::string(dtype.name) + " [";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string encode_header(const Header& h) {
  const bool all_checksummed =
      !h.tensors.empty() && std::all_of(h.tensors.begin(), h.tensors.end(),
                                        [](const TensorEntry& t) { return t.crc32.has_value(); });
  std::string out = "{\"__metadata__\":{";
  bool first = true;
  const auto meta = [&](std::string_view key, std::string_view value) {
    if (!first) out += ',';
    first = false;
    json::append_string(out, key);
    out += ':';
    json::append_string(out, value);
  };
  for (const auto& [key, value] : h.metadata) meta(key, value);
  if (all_checksummed) meta(kChecksumKey, "crc32");
  for (const TensorEntry& t : h.tensors) {
    if (t.crc32) meta(std::string(kCrcPrefix) + t.name, hex8(*t.crc32));
  }
  out += '}';
  for (const TensorEntry& t : h.tensors) {
    out += ',';
    json::append_string(out, t.name);
    out += ":{\"dtype\":";
    json::append_string(out, t.dtype->name);
    out += ",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) out += (i ? "," : "") + std::to_string(t.shape[i]);
    out += "],\"data_offsets\":[" + std::to_string(t.begin) + "," + std::to_string(t.end) + "]}";
  }
  out += '}';
  // 8 + N must be a multiple of 8, so every tensor (largest elements first)
  // starts aligned in the file.
  out.append((8 - out.size() % 8) % 8, ' ');
  return out;
}

std::string file_start(const std::string& encoded_header) {
  std::string out(8, '\0');
  uint64_t n = encoded_header.size();
  for (char& b : out) {
    b = static_cast<char>(n & 0xFFu);
    n >>= 8;
  }
  return out + encoded_header;
}

Header decode_header(std::string_view json, uint64_t file_size) {
  if (json.empty() || json.front() != '{')
    data_loss("invalid JSON header: it does not start with '{'");
  json::Value root;
  try {
    root = json::parse(json);
  } catch (const json::ParseError& e) {
    // At a byte: a header is one line.
    data_loss("invalid JSON header: at byte " + std::to_string(e.offset()) + ": " + e.message());
  }

  Header h;
  std::unordered_map<std::string, std::string> crc_entries;
  std::optional<std::string> checksum_kind;
  for (const auto& [name, at, value] : root.members) {
    if (name != "__metadata__") {
      h.tensors.push_back(decode_tensor(name, value));
      continue;
    }
    if (!value.is_object()) data_loss("__metadata__ must be an object of strings");
    for (const auto& [key, key_at, item] : value.members) {
      if (!item.is_string()) data_loss("__metadata__ entry \"" + key + "\" must be a string");
      if (key == kChecksumKey) {
        checksum_kind = item.text;
      } else if (key.compare(0, kCrcPrefix.size(), kCrcPrefix) == 0) {
        crc_entries.emplace(key.substr(kCrcPrefix.size()), item.text);
      } else {
        h.metadata.emplace_back(key, item.text);
      }
    }
  }

  // The data section: tensors must tile it exactly, in offset order.
  std::stable_sort(h.tensors.begin(), h.tensors.end(),
                   [](const TensorEntry& a, const TensorEntry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  uint64_t data_end = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& t : h.tensors) {
    if (t.begin < data_end) {
      data_loss("tensors " + quoted(previous->name) + " " + range(previous->begin, previous->end) +
                " and " + quoted(t.name) + " " + range(t.begin, t.end) +
                " overlap in the data section");
    }
    if (t.begin > data_end) {
      data_loss("bytes " + range(data_end, t.begin) + " of the data section belong to no tensor " +
                "(before tensor " + quoted(t.name) + ")");
    }
    data_end = t.end;
    previous = &t;
  }
  const uint64_t header_end = 8 + json.size();
  const uint64_t data_size = file_size - header_end;  // the caller checked header_end <= file_size
  if (data_end > data_size) {
    const TensorEntry* cut = nullptr;
    for (const TensorEntry& t : h.tensors) {
      if (t.end > data_size) {
        cut = &t;
        break;
      }
    }
    data_loss("file is truncated: it has " + std::to_string(file_size) +
              " bytes, but its header describes " + std::to_string(header_end + data_end) +
              " (tensor " + quoted(cut->name) + " has data_offsets " + range(cut->begin, cut->end) +
              ", out of range of the " + std::to_string(data_size) + "-byte data section)");
  }
  if (data_end < data_size) {
    data_loss("file has " + std::to_string(data_size - data_end) +
              " bytes after the last tensor: it has " + std::to_string(file_size) +
              " bytes, but its header describes " + std::to_string(header_end + data_end) +
              " (data section not covered by the tensors)");
  }

  // Checksums.
  if (checksum_kind) {
    if (*checksum_kind != "crc32") {
      throw Exception(RH_ERROR_UNIMPLEMENTED,
                      "__metadata__ names checksum '" + *checksum_kind + "', only crc32 is known");
    }
    h.checksummed = true;
  }
  for (TensorEntry& t : h.tensors) {
    auto it = crc_entries.find(t.name);
    if (it == crc_entries.end()) {
      if (h.checksummed) data_loss("no checksum for tensor " + quoted(t.name) + " in __metadata__");
      continue;
    }
    t.crc32 = parse_hex8(it->second);
    if (!t.crc32) {
      data_loss("checksum of tensor " + quoted(t.name) + " is '" + it->second +
                "', expected 8 lowercase hex digits");
    }
    crc_entries.erase(it);
  }
  if (!crc_entries.empty())
    data_loss("__metadata__ has a checksum for tensor " + quoted(crc_entries.begin()->first) +
              ", which the header does not describe");
  return h;
}

}  // namespace rh::safetensors

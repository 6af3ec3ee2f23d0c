#include "cli/conformance/ModelFiles.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <vector>

#include "formats/PosixFile.hpp"
#include "formats/SafetensorsHeader.hpp"

namespace fs = std::filesystem;

namespace rh::cli::conformance {
namespace {

struct Tensor {
  std::string dtype;
  std::vector<uint64_t> shape;
  std::string bytes;
};

std::map<std::string, Tensor> read_tensors(const fs::path& path) {
  try {
    const posix::PosixFile file = posix::PosixFile::open_read(path.string());
    const uint64_t size = file.size();
    if (size < 8) throw std::runtime_error("shorter than a safetensors header");
    unsigned char length_bytes[8];
    file.read_at(0, length_bytes, 8);
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | length_bytes[i];  // little endian
    if (length > safetensors::kMaxHeaderSize || 8 + length > size)
      throw std::runtime_error("header length " + std::to_string(length) + " is impossible");
    std::string json(length, '\0');
    file.read_at(8, json.data(), json.size());
    const safetensors::Header header = safetensors::decode_header(json, size);
    std::map<std::string, Tensor> out;
    for (const auto& t : header.tensors) {
      Tensor tensor{std::string(t.dtype->name), t.shape, std::string(t.size(), '\0')};
      if (t.size() > 0) file.read_at(8 + length + t.begin, tensor.bytes.data(), t.size());
      out.emplace(t.name, std::move(tensor));
    }
    return out;
  } catch (const std::exception& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
}

// The tensor's values as doubles; false for a dtype compared bytewise.
bool values(const Tensor& t, std::vector<double>& out) {
  out.clear();
  if (t.dtype == "F32" || t.dtype == "F64" || t.dtype == "BF16") {
    const size_t width = t.dtype == "F64" ? 8 : t.dtype == "F32" ? 4 : 2;
    out.reserve(t.bytes.size() / width);
    for (size_t at = 0; at + width <= t.bytes.size(); at += width) {
      if (width == 8) {
        double v;
        std::memcpy(&v, t.bytes.data() + at, 8);
        out.push_back(v);
      } else {
        // BF16 is the upper half of an F32 (little-endian files, hosts).
        uint32_t bits = 0;
        std::memcpy(reinterpret_cast<char*>(&bits) + (width == 2 ? 2 : 0), t.bytes.data() + at,
                    width);
        float v;
        std::memcpy(&v, &bits, 4);
        out.push_back(v);
      }
    }
    return true;
  }
  return false;
}

std::string shape_str(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

ModelDifference compare_models(const fs::path& file, const fs::path& reference,
                               bool across_dtypes) {
  const auto a = read_tensors(file);
  const auto ref = read_tensors(reference);
  const std::string both = file.string() + " and " + reference.string();
  for (const auto& [name, t] : ref)
    if (a.count(name) == 0) throw std::runtime_error(both + ": '" + name + "' only in the latter");
  ModelDifference d;
  std::vector<double> va, vr;
  for (const auto& [name, t] : a) {
    const auto it = ref.find(name);
    if (it == ref.end()) throw std::runtime_error(both + ": '" + name + "' only in the former");
    const Tensor& r = it->second;
    const auto by_value = [](const Tensor& x) {
      return x.dtype == "F32" || x.dtype == "F64" || x.dtype == "BF16";
    };
    const bool dtypes_ok = t.dtype == r.dtype || (across_dtypes && by_value(t) && by_value(r));
    if (!dtypes_ok || t.shape != r.shape)
      throw std::runtime_error(both + ": '" + name + "' is " + t.dtype + " " + shape_str(t.shape) +
                               " against " + r.dtype + " " + shape_str(r.shape));
    double rel = 0;
    if (values(t, va) && values(r, vr)) {
      double max_abs = 0, max_diff = 0;
      for (size_t i = 0; i < vr.size(); ++i) {
        max_abs = std::max(max_abs, std::fabs(vr[i]));
        const double diff = std::fabs(va[i] - vr[i]);
        // NaN never compares greater: count it as infinitely far.
        max_diff =
            std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::max(max_diff, diff);
      }
      rel = max_abs > 0 ? max_diff / max_abs : max_diff;
    } else if (t.bytes != r.bytes) {
      rel = std::numeric_limits<double>::infinity();
    }
    ++d.tensors;
    if (d.worst_tensor.empty() || rel > d.max_relative) {
      d.max_relative = rel;
      d.worst_tensor = name;
    }
  }
  return d;
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  auto read = [](const fs::path& p) {
    const posix::PosixFile file = posix::PosixFile::open_read(p.string());
    std::string bytes(file.size(), '\0');
    if (!bytes.empty()) file.read_at(0, bytes.data(), bytes.size());
    return bytes;
  };
  return read(a) == read(b);
}

}  // namespace rh::cli::conformance

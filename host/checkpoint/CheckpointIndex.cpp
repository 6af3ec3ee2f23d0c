#include "checkpoint/CheckpointIndex.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "abi/HostError.hpp"
#include "abi/StateDict.hpp"
#include "rh/cpp/crc32.hpp"

namespace rh::checkpoint {
namespace {

// Record fields are separated by tabs, records by newlines: both escaped.
std::string escape_field(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string unescape_field(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    out += c == 't' ? '\t' : c == 'n' ? '\n' : c;
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

}  // namespace

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out;
}

int64_t LogicalTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> kSizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1}};
  const auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

std::string encode_records(const std::vector<ShardRecord>& records) {
  std::string out;
  for (const ShardRecord& r : records)
    out += escape_field(r.tensor) + "\t" + r.dtype + "\t" + shape_text(r.shape) + "\t" +
           escape_field(r.shard.file) + "\t" + escape_field(r.shard.key) + "\t" +
           std::to_string(r.shard.offset) + "\t" + std::to_string(r.shard.numel) + "\t" +
           std::to_string(r.shard.crc32) + "\n";
  return out;
}

std::vector<ShardRecord> decode_records(const std::string& text) {
  std::vector<ShardRecord> out;
  for (const std::string& line : split(text, '\n')) {
    if (line.empty()) continue;
    const std::vector<std::string> f = split(line, '\t');
    if (f.size() != 8) throw std::invalid_argument("bad shard record: " + line);
    ShardRecord r;
    r.tensor = unescape_field(f[0]);
    r.dtype = f[1];
    if (!f[2].empty())
      for (const std::string& d : split(f[2], ',')) r.shape.push_back(std::stoll(d));
    r.shard.file = unescape_field(f[3]);
    r.shard.key = unescape_field(f[4]);
    r.shard.offset = std::stoll(f[5]);
    r.shard.numel = std::stoll(f[6]);
    r.shard.crc32 = static_cast<uint32_t>(std::stoul(f[7]));
    out.push_back(std::move(r));
  }
  return out;
}

void fill_checksums(std::vector<ShardRecord>& records,
                    const std::map<std::string, const rh_StateDict*>& files) {
  for (ShardRecord& r : records) {
    const auto d = files.find(r.shard.file);
    if (d == files.end())
      throw host::HostError(RH_ERROR_INTERNAL, "shard of '" + r.tensor + "' in file '" +
                                                   r.shard.file +
                                                   "', which this rank does not write");
    const rh_StateDict::Entry& e = d->second->entries.at(r.shard.key);
    r.shard.crc32 = e.crc32 ? *e.crc32 : crc32_update(0, e.data(), e.size());
  }
}

std::string tiling_problem(const LogicalTensor& t) {
  int64_t next = 0;
  for (const ShardRef& s : t.shards) {
    if (s.offset != next)
      return s.offset > next ? "elements [" + std::to_string(next) + ", " +
                                   std::to_string(s.offset) + ") are in no shard"
                             : "shards overlap at element " + std::to_string(s.offset);
    next += s.numel;
  }
  if (next != t.numel())
    return "its shards hold " + std::to_string(next) + " of its " + std::to_string(t.numel()) +
           " elements";
  return "";
}

namespace {
constexpr const char* kWritten = "written\n";
constexpr const char* kFailed = "failed";
}  // namespace

std::string encode_report(const ShardReport& report) {
  return report.written ? kWritten + encode_records(report.records) : kFailed;
}

ShardReport decode_report(const std::string& text) {
  ShardReport report;
  if (text == kFailed) return report;
  const std::string prefix = kWritten;
  if (text.compare(0, prefix.size(), prefix) != 0)
    throw std::invalid_argument("not a shard report: '" + text.substr(0, 40) + "'");
  report.written = true;
  report.records = decode_records(text.substr(prefix.size()));
  return report;
}

TensorIndex merge_records(const std::vector<ShardRecord>& records) {
  TensorIndex index;
  for (const ShardRecord& r : records) {
    auto [it, fresh] = index.try_emplace(r.tensor);
    LogicalTensor& t = it->second;
    if (fresh) {
      t.shape = r.shape;
      t.dtype = r.dtype;
    } else if (t.shape != r.shape || t.dtype != r.dtype) {
      throw std::invalid_argument("tensor '" + r.tensor + "' is reported as " + r.dtype + " [" +
                                  shape_text(r.shape) + "] and as " + t.dtype + " [" +
                                  shape_text(t.shape) + "]");
    }
    const bool seen = std::any_of(t.shards.begin(), t.shards.end(), [&](const ShardRef& s) {
      return s.offset == r.shard.offset && s.numel == r.shard.numel;
    });
    if (!seen && r.shard.numel > 0) t.shards.push_back(r.shard);
  }
  for (auto& [name, t] : index) {
    std::sort(t.shards.begin(), t.shards.end(),
              [](const ShardRef& a, const ShardRef& b) { return a.offset < b.offset; });
    const std::string why = tiling_problem(t);
    if (!why.empty()) throw std::invalid_argument("tensor '" + name + "': " + why);
  }
  return index;
}

std::vector<Piece> pieces_of(const LogicalTensor& t, int64_t offset, int64_t numel) {
  std::vector<Piece> out;
  const int64_t end = offset + numel;
  for (const ShardRef& s : t.shards) {
    const int64_t a = std::max(offset, s.offset), b = std::min(end, s.offset + s.numel);
    if (a < b) out.push_back({&s, a - s.offset, b - a, a - offset});
  }
  return out;
}

}  // namespace rh::checkpoint

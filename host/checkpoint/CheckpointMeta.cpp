#include "checkpoint/CheckpointMeta.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <stdexcept>

#include "abi/HostError.hpp"
#include "formats/Json.hpp"

namespace fs = std::filesystem;

namespace rh::checkpoint {
namespace {

using json::Value;

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// "tensor 'x': " + what, at the value's line:column.
[[noreturn]] void bad_tensor(const std::string& name, const json::Position& at,
                             const std::string& what) {
  throw std::invalid_argument(at.str() + ": tensor '" + name + "': " + what);
}

int64_t integer(const Value& v, const std::string& tensor, const char* what) {
  const std::optional<int64_t> n = v.as_int64();
  if (!n) bad_tensor(tensor, v.at, std::string(what) + " is " + v.kind_name() + ", not an integer");
  return *n;
}

const Value& field(const Value& object, const std::string& tensor, const char* key,
                   Value::Kind kind) {
  const Value* v = object.find(key);
  if (v == nullptr || v->kind != kind)
    bad_tensor(tensor, v ? v->at : object.at,
               std::string("needs \"") + key + "\" (" + Value::kind_name(kind) + ")");
  return *v;
}

ShardRef parse_shard(const Value& s, const std::string& name, int64_t numel) {
  if (!s.is_object()) bad_tensor(name, s.at, "a shard is " + std::string(s.kind_name()));
  ShardRef r;
  r.file = field(s, name, "file", Value::Kind::String).text;
  r.key = field(s, name, "key", Value::Kind::String).text;
  r.offset = integer(field(s, name, "offset", Value::Kind::Number), name, "\"offset\"");
  r.numel = integer(field(s, name, "numel", Value::Kind::Number), name, "\"numel\"");
  const Value& crc = field(s, name, "crc32", Value::Kind::String);
  if (crc.text.empty() || crc.text.size() > 8 ||
      crc.text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    bad_tensor(name, crc.at, "\"crc32\" '" + crc.text + "' is not a 32-bit hex number");
  r.crc32 = static_cast<uint32_t>(std::stoul(crc.text, nullptr, 16));
  int64_t end = 0;
  if (r.offset < 0 || r.numel <= 0 || __builtin_add_overflow(r.offset, r.numel, &end) ||
      end > numel)
    bad_tensor(name, s.at,
               "a shard with offset " + std::to_string(r.offset) + " and numel " +
                   std::to_string(r.numel) + " in " + std::to_string(numel) + " elements");
  return r;
}

TensorIndex index_from(const Value& tensors) {
  if (!tensors.is_object())
    throw std::invalid_argument(tensors.at.str() + ": \"tensors\" is not an object");
  TensorIndex index;
  for (const json::Member& entry : tensors.members) {
    const std::string& name = entry.key;
    const Value& v = entry.value;
    if (!v.is_object()) bad_tensor(name, v.at, "needs \"shape\", \"dtype\" and \"shards\"");
    LogicalTensor t;
    int64_t numel = 1;
    for (const Value& d : field(v, name, "shape", Value::Kind::Array).items) {
      t.shape.push_back(integer(d, name, "a dimension"));
      if (t.shape.back() < 0) bad_tensor(name, d.at, "negative dimension");
      if (__builtin_mul_overflow(numel, t.shape.back(), &numel))
        bad_tensor(name, d.at, "its element count overflows");
    }
    const Value& dtype = field(v, name, "dtype", Value::Kind::String);
    t.dtype = dtype.text;
    if (dtype_size(t.dtype) == 0) bad_tensor(name, dtype.at, "unknown dtype '" + t.dtype + "'");
    for (const Value& s : field(v, name, "shards", Value::Kind::Array).items)
      t.shards.push_back(parse_shard(s, name, numel));
    std::sort(t.shards.begin(), t.shards.end(),
              [](const ShardRef& a, const ShardRef& b) { return a.offset < b.offset; });
    const std::string why = tiling_problem(t);
    if (!why.empty()) bad_tensor(name, v.at, why);
    index.emplace(name, std::move(t));
  }
  return index;
}

[[noreturn]] void data_loss(const std::string& where, const std::string& what) {
  throw host::HostError(RH_ERROR_DATA_LOSS, where + ": " + what);
}

// Throws DATA_LOSS for anything json:: refuses: `where:line:col: ...`.
template <typename F>
auto reading(const std::string& where, F&& read) {
  try {
    return read();
  } catch (const json::ParseError& e) {
    throw host::HostError(RH_ERROR_DATA_LOSS,
                          where + " is corrupted: " + e.what() + " (not valid JSON)");
  } catch (const json::TypeError& e) {
    data_loss(where, e.what());
  } catch (const std::invalid_argument& e) {
    data_loss(where, e.what());
  }
}

}  // namespace

std::string read_whole(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in)
    throw host::HostError(RH_ERROR_IO, "cannot open " + p.string() + ": " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    throw host::HostError(RH_ERROR_IO, "cannot read " + p.string() + ": " + std::strerror(errno));
  return bytes;
}

bool plain_name(const std::string& name) {
  static const std::regex kName("[A-Za-z0-9_][A-Za-z0-9_.-]*");
  return name.size() <= 200 && std::regex_match(name, kName);
}

// ---- The tensor table ------------------------------------------------------------

std::string index_json(const TensorIndex& index, const std::string& indent) {
  std::string out = "{";
  bool first = true;
  for (const auto& [name, t] : index) {
    out += std::string(first ? "" : ",") + "\n" + indent + "  " + json::quoted(name) +
           ": {\"shape\": [" + shape_text(t.shape) + "], \"dtype\": " + json::quoted(t.dtype) +
           ", \"shards\": [";
    for (size_t i = 0; i < t.shards.size(); ++i) {
      const ShardRef& s = t.shards[i];
      out += std::string(i ? ", " : "") + "{\"file\": " + json::quoted(s.file) +
             ", \"key\": " + json::quoted(s.key) + ", \"offset\": " + std::to_string(s.offset) +
             ", \"numel\": " + std::to_string(s.numel) + ", \"crc32\": \"" + hex8(s.crc32) + "\"}";
    }
    out += "]}";
    first = false;
  }
  return out + "\n" + indent + "}";
}

TensorIndex parse_index(std::string_view tensors_json) {
  try {
    return index_from(json::parse(tensors_json));
  } catch (const json::ParseError& e) {
    throw std::invalid_argument(e.what());
  }
}

// ---- meta.json -------------------------------------------------------------------

std::string meta_json(const CheckpointMeta& m) {
  std::string out = "{\n  \"format_version\": " + std::to_string(m.format_version);
  auto text = [&](const char* key, const std::string& value) {
    out += std::string(",\n  \"") + key + "\": " + json::quoted(value);
  };
  auto number = [&](const char* key, int64_t value) {
    out += std::string(",\n  \"") + key + "\": " + std::to_string(value);
  };
  text("runner", m.runner);
  text("name", m.name);
  number("epoch", m.epoch);
  number("iter", m.iter);
  number("samples_in_epoch", m.samples_in_epoch);
  number("world_size", m.world_size);
  text("strategy", m.strategy);
  text("checkpoint_io", m.checkpoint_io);
  out += ",\n  \"files\": " + json::string_array(m.files);
  if (m.model_sharded) text("model_state", "sharded");
  if (m.optimizer_params)
    out += ",\n  \"optimizer_params\": " + json::string_array(*m.optimizer_params);
  out += ",\n  \"tensors\": " + index_json(m.tensors, "  ");
  text("config", m.config);
  return out + "\n}\n";
}

CheckpointMeta parse_meta(std::string_view text, const std::string& where) {
  CheckpointMeta m = reading(where, [&] {
    const Value doc = json::parse(text);
    if (!doc.is_object()) throw json::TypeError(doc.at, "meta.json is not an object");
    CheckpointMeta m;
    m.format_version = static_cast<int>(json::int64_member(doc, "format_version"));
    m.iter = json::int64_member(doc, "iter");
    m.files = json::string_items(json::member(doc, "files", Value::Kind::Array), "\"files\"");
    if (const Value* v = json::find_member(doc, "runner", Value::Kind::String)) m.runner = v->text;
    if (const Value* v = json::find_member(doc, "name", Value::Kind::String)) m.name = v->text;
    m.epoch = json::find_int64_member(doc, "epoch").value_or(0);
    m.samples_in_epoch = json::find_int64_member(doc, "samples_in_epoch").value_or(0);
    if (const Value* v = json::find_member(doc, "checkpoint_io", Value::Kind::String))
      m.checkpoint_io = v->text;
    if (const Value* v = json::find_member(doc, "model_state", Value::Kind::String))
      m.model_sharded = v->text == "sharded";
    if (m.format_version >= 2) {
      if (const Value* v = json::find_member(doc, "strategy", Value::Kind::String))
        m.strategy = v->text;
      m.world_size = json::find_int64_member(doc, "world_size").value_or(0);
      m.tensors = index_from(json::member(doc, "tensors", Value::Kind::Object));
    }
    if (const Value* params = doc.find("optimizer_params")) {
      if (!params->is_array())
        throw json::TypeError(params->at, "\"optimizer_params\" is not a list of names");
      m.optimizer_params = json::string_items(*params, "\"optimizer_params\"");
    }
    if (const Value* v = json::find_member(doc, "config", Value::Kind::String)) m.config = v->text;
    return m;
  });
  for (const auto& [name, t] : m.tensors)
    for (const ShardRef& s : t.shards)
      if (std::find(m.files.begin(), m.files.end(), s.file) == m.files.end())
        data_loss(where, "tensor '" + name + "' has a shard in '" + s.file +
                             "', which \"files\" does not list");
  for (const std::string& stem : m.files)
    if (!plain_name(stem))
      throw host::HostError(RH_ERROR_DATA_LOSS,
                            "checkpoint " + fs::path(where).parent_path().string() +
                                ": meta.json lists the file stem '" + stem +
                                "', which is not a plain file name ([A-Za-z0-9_.-], not "
                                "starting with '.'); refusing to read it");
  return m;
}

CheckpointMeta read_meta(const fs::path& dir) {
  const fs::path p = dir / "meta.json";
  std::error_code ec;
  if (!fs::exists(p, ec))
    throw host::HostError(RH_ERROR_DATA_LOSS,
                          p.string() + " is missing (an incomplete checkpoint)");
  std::string text;
  try {
    text = read_whole(p);
  } catch (const host::HostError& e) {
    throw host::HostError(RH_ERROR_DATA_LOSS, e.what());
  }
  return parse_meta(text, p.string());
}

CheckpointMeta read_current_meta(const fs::path& dir) {
  CheckpointMeta meta = read_meta(dir);
  if (meta.format_version != kCheckpointFormatVersion)
    throw host::HostError(
        RH_ERROR_FAILED_PRECONDITION,
        "checkpoint " + dir.string() + " has format_version " +
            std::to_string(meta.format_version) + "; this runner-host reads format " +
            std::to_string(kCheckpointFormatVersion) +
            " (docs/checkpoint-format.md). Format 1 (runner-host before the sharded layout) "
            "has no tensor table: load_from: " +
            (dir / "model.safetensors").string() + " starts from its weights");
  return meta;
}

std::string meta_digest(const fs::path& dir) {
  const fs::path p = dir / "meta.json";
  std::error_code ec;
  if (!fs::is_regular_file(p, ec))
    throw host::HostError(RH_ERROR_DATA_LOSS,
                          p.string() + " is missing (an incomplete checkpoint)");
  const std::string bytes = read_whole(p);
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64: offset basis and prime
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

// ---- The loop state -----------------------------------------------------------------

std::string loop_state_json(const LoopState& l) {
  return "{\"epochs_done\": " + std::to_string(l.epochs_done) +
         ", \"iters_done\": " + std::to_string(l.iters_done) +
         ", \"inner_done\": " + std::to_string(l.inner_done) +
         ", \"global_batch\": " + std::to_string(l.global_batch) +
         ", \"samples_in_epoch\": " + std::to_string(l.samples_in_epoch) +
         ", \"skipped_steps\": " + std::to_string(l.skipped_steps) +
         ", \"world_size\": " + std::to_string(l.world_size) + "}";
}

LoopState parse_loop_state(std::string_view text, const std::string& where) {
  return reading(where, [&] {
    const Value doc = json::parse(text);
    if (!doc.is_object()) throw json::TypeError(doc.at, "the loop state is not an object");
    LoopState l;
    l.epochs_done = json::int64_member(doc, "epochs_done");
    l.iters_done = json::int64_member(doc, "iters_done");
    l.inner_done = json::int64_member(doc, "inner_done");
    l.world_size = json::int64_member(doc, "world_size");
    // Absent in checkpoints of runner-host before they were recorded.
    l.global_batch = json::find_int64_member(doc, "global_batch").value_or(0);
    l.samples_in_epoch = json::find_int64_member(doc, "samples_in_epoch").value_or(-1);
    l.skipped_steps = json::find_int64_member(doc, "skipped_steps").value_or(0);
    return l;
  });
}

}  // namespace rh::checkpoint

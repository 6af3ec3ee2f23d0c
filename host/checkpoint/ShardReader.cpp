#include "checkpoint/ShardReader.hpp"

#include <cstring>
#include <map>
#include <set>

#include "abi/HostError.hpp"
#include "checkpoint/CheckpointStore.hpp"
#include "rh/rh_ckpt_io.h"

namespace fs = std::filesystem;

namespace rh::checkpoint {
namespace {

struct DtypeName {
  const char* name;
  DLDataType dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F64", {kDLFloat, 64, 1}},   {"F32", {kDLFloat, 32, 1}}, {"F16", {kDLFloat, 16, 1}},
    {"BF16", {kDLBfloat, 16, 1}}, {"I64", {kDLInt, 64, 1}},   {"I32", {kDLInt, 32, 1}},
    {"I16", {kDLInt, 16, 1}},     {"I8", {kDLInt, 8, 1}},     {"U64", {kDLUInt, 64, 1}},
    {"U32", {kDLUInt, 32, 1}},    {"U16", {kDLUInt, 16, 1}},  {"U8", {kDLUInt, 8, 1}},
    {"BOOL", {6, 8, 1}},  // kDLBool (code 6), spelled out only since DLPack 0.8
};

bool same(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

// One piece to copy: from stored key `key` (a slice read from its
// `shard_offset`) into request `request` at `dest_offset`.
struct Copy {
  size_t request;
  const ShardRef* shard;
  int64_t shard_offset;
  int64_t numel;
  int64_t dest_offset;
};

}  // namespace

DLDataType dl_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.dtype;
  return DLDataType{0, 0, 0};
}

std::string dtype_name(DLDataType dtype) {
  for (const auto& d : kDtypes)
    if (same(dtype, d.dtype)) return d.name;
  return "";
}

ShardReader::ShardReader(const CheckpointStore& store, fs::path dir, const TensorIndex& index)
    : store_(store), dir_(std::move(dir)), index_(index) {}

ShardReader::Request ShardReader::whole(const std::string& name, const std::string& key) const {
  const auto it = index_.find(name);
  if (it == index_.end())
    throw host::HostError(RH_ERROR_NOT_FOUND,
                          "checkpoint " + dir_.string() + " has no tensor '" + name + "'");
  return Request{name, 0, it->second.numel(), it->second.shape, key};
}

void ShardReader::read(const std::vector<Request>& requests, rh_StateDict& out) const {
  // The result entries, and which piece of which stored tensor goes where.
  std::map<std::string, std::vector<Copy>> by_file;
  std::vector<rh_StateDict::Entry*> results;
  std::vector<const LogicalTensor*> tensors;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    const auto it = index_.find(r.tensor);
    if (it == index_.end())
      throw host::HostError(RH_ERROR_NOT_FOUND,
                            "checkpoint " + dir_.string() + " has no tensor '" + r.tensor + "'");
    const LogicalTensor& t = it->second;
    if (r.offset < 0 || r.numel < 0 || r.offset + r.numel > t.numel())
      throw host::HostError(RH_ERROR_NOT_FOUND, "checkpoint " + dir_.string() + ": elements [" +
                                                    std::to_string(r.offset) + ", " +
                                                    std::to_string(r.offset + r.numel) +
                                                    ") are beyond tensor '" + r.tensor + "' of " +
                                                    std::to_string(t.numel()) + " elements");
    rh_StateDict::Entry& e = out.entries[r.key];
    e = rh_StateDict::Entry{};
    e.is_tensor = true;
    e.dtype = dl_dtype(t.dtype);
    e.shape = r.shape ? *r.shape : std::vector<int64_t>{r.numel};
    // Allocated at the first piece copied (uninitialised: the pieces tile
    // it); a piece that is the whole request is moved in instead (no copy).
    if (r.numel == 0) e.bytes.clear();
    results.push_back(&e);
    tensors.push_back(&t);
    for (const Piece& p : pieces_of(t, r.offset, r.numel))
      by_file[p.shard->file].push_back({i, p.shard, p.shard_offset, p.numel, p.dest_offset});
  }
  for (auto& [file, copies] : by_file) {
    // LoadSlices takes each stored key once: one call per round of distinct keys.
    while (!copies.empty()) {
      std::vector<Copy> round, later;
      std::set<std::string> seen;
      for (const Copy& c : copies) (seen.insert(c.shard->key).second ? round : later).push_back(c);
      std::vector<rh_CheckpointSlice> slices;
      for (const Copy& c : round)
        slices.push_back({RH_CHECKPOINT_SLICE_STRUCT_SIZE,
                          {c.shard->key.data(), c.shard->key.size()},
                          c.shard_offset,
                          c.numel});
      rh_StateDict got;
      bool sliced = false;
      try {
        sliced = store_.load_slices(dir_, file, slices, got);
        if (!sliced) store_.load(dir_, file, got);
      } catch (const host::HostError& e) {
        std::string of;  // which logical tensors this file was read for
        for (const Copy& c : round)
          if (of.find("'" + requests[c.request].tensor + "'") == std::string::npos)
            of += (of.empty() ? "'" : ", '") + requests[c.request].tensor + "'";
        throw host::HostError(e.code(), std::string(e.what()) + " (reading shards of " + of + ")");
      }
      for (const Copy& c : round) {
        const std::string& tensor = requests[c.request].tensor;
        const LogicalTensor& t = *tensors[c.request];
        const size_t elem = dtype_size(t.dtype);
        auto where = [&] {
          return (dir_ / file).string() + ": stored tensor '" + c.shard->key + "' (a shard of '" +
                 tensor + "')";
        };
        const auto found = got.entries.find(c.shard->key);
        if (found == got.entries.end() || !found->second.is_tensor)
          throw host::HostError(RH_ERROR_DATA_LOSS, where() + " is missing from the file");
        rh_StateDict::Entry& s = found->second;
        if (!same(s.dtype, dl_dtype(t.dtype)))
          throw host::HostError(RH_ERROR_DATA_LOSS, where() + " is " + dtype_name(s.dtype) +
                                                        ", meta.json says " + t.dtype);
        const int64_t have = static_cast<int64_t>(s.size() / elem);
        const int64_t from = sliced ? 0 : c.shard_offset;
        if (have != (sliced ? c.numel : c.shard->numel))
          throw host::HostError(RH_ERROR_DATA_LOSS,
                                where() + " has " + std::to_string(have) +
                                    " elements, meta.json says " +
                                    std::to_string(sliced ? c.numel : c.shard->numel));
        rh_StateDict::Entry& dest = *results[c.request];
        const size_t want = static_cast<size_t>(requests[c.request].numel) * elem;
        const bool owned = s.borrowed == nullptr || s.owner != nullptr;
        if (c.numel == requests[c.request].numel && from == 0 && owned && s.size() == want) {
          // The one piece of the request, as read: its memory changes hands.
          dest.bytes = std::move(s.bytes);
          dest.owner = std::move(s.owner);
          dest.borrowed = s.borrowed;
          dest.borrowed_size = s.borrowed_size;
          continue;
        }
        if (dest.size() != want) host::allocate_entry(dest, want);
        std::memcpy(const_cast<uint8_t*>(dest.data()) + c.dest_offset * elem,
                    s.data() + from * elem, static_cast<size_t>(c.numel) * elem);
      }
      copies = std::move(later);
    }
  }
}

}  // namespace rh::checkpoint

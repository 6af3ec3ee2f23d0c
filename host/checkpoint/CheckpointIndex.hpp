// The tensor table of a checkpoint's meta.json (docs/checkpoint-format.md):
// every logical tensor (model weights, the optimizer's state and fp32
// masters, the run's own state) with its global shape, dtype and the shards
// that hold it. A shard is one contiguous range of the tensor flattened in
// C order, stored as one tensor of one file; the shards of a tensor tile it
// exactly. Every strategy writes this one layout, so any strategy on any
// world size finds the elements it needs (resharding at load).
//
// Logical names: "model.<name>" (parameters and buffers, as the model names
// them), "optim.<param>.<field>" (the optimizer's state: step, exp_avg,
// exp_avg_sq, max_exp_avg_sq, momentum_buffer), "master.<param>" (a sharding
// strategy's fp32 master values), "state.<key>" (generators, the strategy's
// and the hooks' tensors).
//
// No LibTorch here: dtypes are safetensors' names (F32, BF16, I64, ...).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

struct rh_StateDict;

namespace rh::checkpoint {

struct ShardRef {
  std::string file;    // the file's stem: "model", "optimizer.rank1", ...
  std::string key;     // the tensor's key in that file
  int64_t offset = 0;  // its first element in the logical tensor (flattened, C order)
  int64_t numel = 0;   // elements
  uint32_t crc32 = 0;  // CRC-32 of the shard's bytes as stored (rh/cpp/crc32.hpp)
};

struct LogicalTensor {
  std::vector<int64_t> shape;
  std::string dtype;
  std::vector<ShardRef> shards;  // by offset, tiling [0, numel())
  int64_t numel() const;
};

using TensorIndex = std::map<std::string, LogicalTensor>;

// One shard as a rank reports it (save): the logical tensor it belongs to.
struct ShardRecord {
  std::string tensor;
  std::vector<int64_t> shape;  // the logical tensor's
  std::string dtype;
  ShardRef shard;
};

// Sets each record's checksum once the files it names are written: the
// one the checkpoint-IO plugin reported for the entry (StateDict_SetChecksum,
// computed while writing it), else computed here. `files` maps each stem
// this rank wrote to its dict; a record of another file is
// RH_ERROR_INTERNAL.
void fill_checksums(std::vector<ShardRecord>& records,
                    const std::map<std::string, const rh_StateDict*>& files);

// Records <-> text lines, to gather every rank's records on rank 0.
std::string encode_records(const std::vector<ShardRecord>& records);
std::vector<ShardRecord> decode_records(const std::string& text);

// Merges every rank's records into the table: records of the same tensor
// must agree on shape and dtype; a range given by several ranks (a value
// every rank holds, such as a shard's step) is kept once, from the first.
// Throws std::invalid_argument naming the tensor when the shards do not
// tile it exactly.
TensorIndex merge_records(const std::vector<ShardRecord>& records);

// What a rank tells rank 0 once its part of a sharded save is written (or
// could not be): the shards its files hold, with their checksums. Rank 0
// merges every rank's into meta.json's table. Travels between ranks as text.
struct ShardReport {
  bool written = false;  // false: this rank failed (its log says why)
  std::vector<ShardRecord> records;
};
std::string encode_report(const ShardReport& report);
// Throws std::invalid_argument for text encode_report did not make.
ShardReport decode_report(const std::string& text);

// meta.json's text of the table: index_json / parse_index (CheckpointMeta.hpp).

// The tiling check parse_index and merge_records make ("" when fine).
std::string tiling_problem(const LogicalTensor& t);

// Where elements [offset, offset + numel) of `t` lie: pieces of its shards in
// order, each `numel` elements from `shard_offset` in the shard, going to
// `dest_offset` of the requested range.
struct Piece {
  const ShardRef* shard;
  int64_t shard_offset;
  int64_t numel;
  int64_t dest_offset;
};
std::vector<Piece> pieces_of(const LogicalTensor& t, int64_t offset, int64_t numel);

// "2,3": a shape as the records and meta.json write it.
std::string shape_text(const std::vector<int64_t>& shape);

// Bytes per element of a dtype name (0: unknown).
size_t dtype_size(const std::string& dtype);

}  // namespace rh::checkpoint

// Reads ranges of a checkpoint's logical tensors (CheckpointIndex.hpp) from
// the shards that hold them: each file is asked once per read() for exactly
// the pieces needed (the checkpoint-IO plugin's LoadSlices; a plugin without
// it loads the file whole and the pieces are cut from it). No LibTorch: the
// result is state-dict entries, bytes in the logical dtype.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "abi/StateDict.hpp"
#include "checkpoint/CheckpointIndex.hpp"

namespace rh::checkpoint {

class CheckpointStore;

// The DLPack dtype of a dtype name, and back ("" when it has none).
DLDataType dl_dtype(const std::string& name);
std::string dtype_name(DLDataType dtype);

class ShardReader {
 public:
  ShardReader(const CheckpointStore& store, std::filesystem::path dir, const TensorIndex& index);

  struct Request {
    std::string tensor;                         // logical name, in the index
    int64_t offset = 0;                         // first element (flattened)
    int64_t numel = 0;                          // elements
    std::optional<std::vector<int64_t>> shape;  // of the result (numel elements); none: 1-D
    std::string key;                            // where the result goes in `out`
  };
  // Every request into `out`. Throws HostError: RH_ERROR_NOT_FOUND for a
  // tensor not in the index or a range beyond it, RH_ERROR_DATA_LOSS (naming
  // the file, the stored key and the tensor) for a shard that is not what
  // meta.json says, or what the plugin reports.
  void read(const std::vector<Request>& requests, rh_StateDict& out) const;

  // Logical tensor `name`, whole, in its shape.
  Request whole(const std::string& name, const std::string& key) const;
  const TensorIndex& index() const { return index_; }

 private:
  const CheckpointStore& store_;
  std::filesystem::path dir_;
  const TensorIndex& index_;
};

}  // namespace rh::checkpoint

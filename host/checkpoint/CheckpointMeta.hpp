// meta.json and the loop state: the two JSON documents of a checkpoint that
// the host itself writes (docs/checkpoint-format.md). Both are written and
// read here, with formats/Json (one reader with line:column errors, one
// escaper), so that the fields a writer puts and a reader expects are side
// by side.
//
//   meta.json  what the checkpoint is: format, iteration, world size,
//              strategy, the files, the tensor table (CheckpointIndex.hpp)
//              and the resolved job; published last, so a directory with a
//              meta.json is complete.
//   loop       the "loop" text entry of the `state` file: where in the data
//              the run was (epochs, iterations, the micro-batch inside an
//              accumulation window, the global batch) for an exact resume.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/CheckpointIndex.hpp"

namespace rh::checkpoint {

// The format this runner writes; it reads 2 (format 1, of runner-host
// before the sharded layout, is refused with the reason).
constexpr int kCheckpointFormatVersion = 2;

struct CheckpointMeta {
  int format_version = kCheckpointFormatVersion;
  std::string runner;  // "runner-host <version>" that wrote it
  std::string name;
  int64_t epoch = 0;  // epochs done
  int64_t iter = 0;   // iterations done
  int64_t samples_in_epoch = 0;
  int64_t world_size = 0;
  std::string strategy;            // the strategy that wrote it ("" before format 2)
  std::string checkpoint_io;       // the plugin type that wrote the files
  std::vector<std::string> files;  // file stems, each a plain file name
  bool model_sharded = false;      // "model_state": "sharded" (sharded_model_state)
  // Format 2: every logical tensor and its shards (CheckpointIndex.hpp).
  TensorIndex tensors;
  // The parameters the writing run's optimizer held, over every rank (each
  // one's state is `optim.<name>.<field>`): what `ckpt inspect` checks the
  // optimizer state covers. nullopt when meta.json does not record them
  // (runner-host before "optimizer_params").
  std::optional<std::vector<std::string>> optimizer_params;
  std::string config;  // the resolved job that wrote it, YAML ("" when absent)
};

// meta.json's text: one field per line, the tensor table one line per tensor.
std::string meta_json(const CheckpointMeta& meta);
// Parses meta.json's text; `where` names the file in errors. Throws HostError
// (RH_ERROR_DATA_LOSS) saying what is wrong and where (line:column), also for
// a "files" stem that is not a plain file name (a third-party checkpoint-IO
// plugin may not check) and a shard in a file "files" does not list.
CheckpointMeta parse_meta(std::string_view text, const std::string& where);
// parse_meta of `dir`/meta.json; DATA_LOSS when missing or unreadable.
CheckpointMeta read_meta(const std::filesystem::path& dir);
// read_meta of a checkpoint this runner can read (kCheckpointFormatVersion);
// another format is RH_ERROR_FAILED_PRECONDITION saying what to do instead.
CheckpointMeta read_current_meta(const std::filesystem::path& dir);

// 64-bit FNV-1a of meta.json's bytes as 16 lowercase hex digits: which
// checkpoint this is (meta.json holds its iteration and the resolved job),
// so ranks can confirm they see the same one. Throws HostError
// (RH_ERROR_DATA_LOSS) naming the file when it is missing, RH_ERROR_IO when
// it cannot be read.
std::string meta_digest(const std::filesystem::path& dir);

// The whole file; HostError(RH_ERROR_IO) naming it and errno when it cannot
// be opened or read.
std::string read_whole(const std::filesystem::path& p);

// The "tensors" object of meta.json (sorted by name, one line per tensor,
// each line indented by `indent` + 2 spaces).
std::string index_json(const TensorIndex& index, const std::string& indent);
// Reads it back from its text; throws std::invalid_argument naming the
// tensor and what is wrong (unknown dtype, negative sizes, shards that do
// not tile it), with the line:column of the value.
TensorIndex parse_index(std::string_view tensors_json);

// The plain-name rule shared by checkpoint names and file stems: it cannot
// leave the directory, hide itself or carry odd bytes
// ([A-Za-z0-9_][A-Za-z0-9_.-]*, at most 200 characters).
bool plain_name(const std::string& name);

// Where the loop was when the checkpoint was saved.
struct LoopState {
  int64_t epochs_done = 0;
  int64_t iters_done = 0;
  int64_t inner_done = 0;         // micro-batches into the accumulation window
  int64_t global_batch = 0;       // 0: not recorded (an older checkpoint)
  int64_t samples_in_epoch = -1;  // -1: not recorded (inner_done × global_batch then)
  int64_t skipped_steps = 0;      // optimizer steps skipped for inf/nan gradients
  int64_t world_size = 0;
};
std::string loop_state_json(const LoopState& loop);
// Throws HostError (RH_ERROR_DATA_LOSS) naming `where` and the field.
LoopState parse_loop_state(std::string_view text, const std::string& where);

}  // namespace rh::checkpoint

// The checkpoint directory protocol (DESIGN.md §6), independent of LibTorch:
//
//   save:  <work_dir>/<name>.tmp-<pid>-<n>/   every file via the checkpoint-IO
//                                             plugin (each fsynced), meta.json last
//          fsync the directory, rename to <work_dir>/<name>, fsync work_dir
//          <work_dir>/latest.tmp -> latest   (atomic replace of the pointer)
//   A failure at any point removes the temporary directory and leaves every
//   published checkpoint and `latest` as they were.
//
//   resume: `latest` when it verifies, else the newest checkpoint (by the
//   iteration in its meta.json) that verifies; a torn or corrupted one is
//   skipped with the reason logged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

struct rh_StateDict;

namespace rh::host {
class CheckpointIoInstance;
}

namespace rh::checkpoint {

struct CheckpointFile {
  std::string stem;          // "model", "optimizer", "state"
  const rh_StateDict* dict;  // borrowed for the call
};

class CheckpointStore {
 public:
  CheckpointStore(std::filesystem::path work_dir, host::CheckpointIoInstance& io);

  const std::filesystem::path& work_dir() const { return work_dir_; }

  // Publishes checkpoint `name`; returns its directory. `meta_json` is the
  // content of meta.json (it must list the stems under "files" and hold
  // "iter"). Throws HostError (RH_ERROR_IO...) naming the directory.
  std::filesystem::path save(const std::string& name, const std::vector<CheckpointFile>& files,
                             const std::string& meta_json);
  // Deletes a published checkpoint; refuses the one `latest` names.
  void remove(const std::string& name);

  // Reads <dir>/<stem>.* through the plugin into `out`; RH_ERROR_DATA_LOSS
  // errors name the file.
  void load(const std::filesystem::path& dir, const std::string& stem, rh_StateDict& out) const;

  // Empty when `dir` is a complete, uncorrupted checkpoint; else the reason.
  std::string verify(const std::filesystem::path& dir) const;
  // The checkpoint `resume: auto` continues from; nullopt when there is none.
  // `skipped` receives "<dir>: <reason>" for every invalid one passed over.
  std::optional<std::filesystem::path> find_resumable(std::vector<std::string>* skipped) const;
  // The name `latest` points to ("" when none).
  std::string latest() const;

  // "[A-Za-z0-9_.-]+", not "latest", not starting with '.'.
  static bool valid_name(const std::string& name);

 private:
  std::filesystem::path work_dir_;
  host::CheckpointIoInstance& io_;
};

// Reads meta.json of a checkpoint directory; throws HostError (DATA_LOSS)
// when missing or unparsable.
struct CheckpointMeta {
  int format_version = 0;
  int64_t iter = 0;
  std::vector<std::string> files;
};
CheckpointMeta read_meta(const std::filesystem::path& dir);

}  // namespace rh::checkpoint

// The checkpoint directory protocol (docs/architecture.md §6), independent of LibTorch:
//
//   save:  <work_dir>/<name>.tmp-<pid>-<n>/   every file via the checkpoint-IO
//                                             plugin (each fsynced), meta.json last
//          fsync the directory; then publish:
//            no <name> yet:  rename(tmp, <name>)
//            <name> exists:  renameat2(tmp, <name>, RENAME_EXCHANGE): the new
//                            one takes the name and the old one the tmp path
//                            in one step, so a complete <name> exists at every
//                            instant (a crash leaves the old or the new one)
//          <work_dir>/latest.tmp -> latest (atomic replace of the pointer),
//          fsync work_dir, then the old one (now at the tmp path) is removed.
//   remove: <name> is renamed to a fresh <name>.tmp-<pid>-<n> (from then on
//          not a checkpoint), and a thread of its own deletes its files
//          (BackgroundRemover: freeing a large file's blocks waits for the
//          file system); the next save waits until it is done.
//   A failure before the new checkpoint has its name removes the temporary
//   directory and leaves every published checkpoint and `latest` as they
//   were (the save throws). Once it has its name the save counts as done:
//   a failure to point `latest` at it, or to fsync work_dir, is a warning
//   saying what is published and what `latest` names (a `latest` naming
//   another checkpoint is removed, so that resume: auto takes the newest
//   valid one by iteration, not that one). Leftover `<name>.tmp-*` of a killed
//   process are never resumed from and are removed by the next save of
//   <name>. A file system that refuses RENAME_EXCHANGE (EINVAL) gets a
//   warning and two renames: the old one aside to <name>.tmp-<pid>-<n>-old,
//   the new one in place. When that is cut short (a crash between the two,
//   or the second rename and the rollback both fail), the moved-aside one is
//   the only copy of a published checkpoint: it is never removed as a
//   leftover while no <name> exists, and the next save (of any name) and
//   resume (find_resumable) put it back under <name>.
//
//   resume: `latest` when it names a valid checkpoint name (never followed
//   otherwise) and that checkpoint verifies, else the newest checkpoint (by
//   the iteration in its meta.json) that verifies; a torn or corrupted one is
//   skipped with the reason logged.
//
//   Tests only: RH_FAULT_INJECT=ckpt_publish:<step> kills the process with
//   SIGKILL at that step of save (files_written, meta_written,
//   latest_tmp_written, exchanged, latest_updated, old_removed; moved_aside in the
//   two-rename fallback);
//   RH_FAULT_INJECT=ckpt_no_exchange makes RENAME_EXCHANGE look unsupported;
//   ckpt_rename:fail makes the rename that gives the new checkpoint its name
//   fail (EIO; in the two-rename fallback, the second rename),
//   ckpt_rollback:fail the fallback's putting the old one back after that,
//   ckpt_latest:fail the rename of latest.tmp over `latest` (and
//   ckpt_latest_remove:fail the removal of a `latest` it leaves stale),
//   ckpt_fsync_work_dir:fail the fsync of work_dir after the publish;
//   ckpt_flush:fail fails the plugin's Flush;
//   ckpt_remove:slow delays each background removal by 300 ms and
//   ckpt_remove:fail makes it fail (EACCES).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "checkpoint/CheckpointIndex.hpp"
#include "checkpoint/CheckpointMeta.hpp"

struct rh_StateDict;
struct rh_CheckpointSlice;

namespace rh::host {
class CheckpointIoInstance;
}

namespace rh::checkpoint {

struct CheckpointFile {
  std::string stem;    // "model", "optimizer", "state"
  rh_StateDict* dict;  // borrowed for the call; the plugin may set its checksums
};

class BackgroundRemover;

class CheckpointStore {
 public:
  CheckpointStore(std::filesystem::path work_dir, host::CheckpointIoInstance& io);
  // Waits for the removals in flight (remove()).
  ~CheckpointStore();
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  const std::filesystem::path& work_dir() const { return work_dir_; }
  // The plugin only queues writes (SavesInBackground): saves go through
  // begin/queue_files, then BackgroundSave.
  bool saves_in_background() const;

  // Publishes checkpoint `name`; returns its directory. `meta_json` gives
  // the content of meta.json (it must list the stems under "files" and hold
  // "iter"), asked for once the files are written (so it can hold the
  // checksums the plugin computed while writing them). Throws HostError
  // (RH_ERROR_IO...) naming the directory. `before_meta` (sharded
  // checkpoints): runs once this process's files are in the temporary
  // directory, before meta.json; the other ranks write theirs into the
  // directory it is given (write_files) meanwhile. Either throws to abandon
  // the save.
  std::filesystem::path save(
      const std::string& name, const std::vector<CheckpointFile>& files,
      const std::function<std::string()>& meta_json,
      const std::function<void(const std::filesystem::path& tmp)>& before_meta = {});
  std::filesystem::path save(const std::string& name, const std::vector<CheckpointFile>& files,
                             const std::string& meta_json) {
    return save(name, files, [&] { return meta_json; });
  }
  // Writes `files` into a save's temporary directory (another rank's
  // before_meta gave it), each fsynced by the plugin. Throws HostError.
  void write_files(const std::filesystem::path& tmp, const std::vector<CheckpointFile>& files);

  // save() in steps, for a save published in the background (a plugin with
  // SavesInBackground): begin() makes the temporary directory (on rank 0,
  // removing a killed process's leftovers); queue_files() hands each file to
  // the plugin's Save, which may only queue it; flush() waits until they are
  // durable; publish() writes meta.json and renames, as save() does
  // (removing `tmp` when it fails); abandon() removes `tmp` (and
  // latest.tmp, which only the save in progress writes). Each throws
  // HostError naming the directory.
  std::filesystem::path begin(const std::string& name);
  void queue_files(const std::filesystem::path& tmp, const std::vector<CheckpointFile>& files);
  void flush(const std::filesystem::path& tmp);
  std::filesystem::path publish(const std::string& name, const std::filesystem::path& tmp,
                                const std::string& meta_json);
  void abandon(const std::filesystem::path& tmp);
  // Deletes a published checkpoint; refuses the one `latest` names. When it
  // returns, <name> is gone (renamed to a temporary); its files are deleted
  // on the remover's thread, a failure there is a warning.
  void remove(const std::string& name);
  // Until the files of every removed checkpoint are deleted (begin() waits
  // so too; the destructor does).
  void wait_for_removals();

  // Reads <dir>/<stem>.* through the plugin into `out`; RH_ERROR_DATA_LOSS
  // errors name the file.
  void load(const std::filesystem::path& dir, const std::string& stem, rh_StateDict& out) const;
  // Reads only `slices` of <dir>/<stem>.* (LoadSlices); false when the
  // plugin cannot (then load() the whole file).
  bool load_slices(const std::filesystem::path& dir, const std::string& stem,
                   const std::vector<rh_CheckpointSlice>& slices, rh_StateDict& out) const;

  // Empty when `dir` is a complete, uncorrupted checkpoint; else the reason.
  std::string verify(const std::filesystem::path& dir) const;
  // The checkpoint `resume: auto` continues from; nullopt when there is none.
  // `skipped` receives "<dir>: <reason>" for every invalid one passed over.
  // First puts back a checkpoint that an unfinished two-rename replacement
  // left at <name>.tmp-<pid>-<n>-old (no <name> exists): work_dir changes,
  // so only rank 0 calls it.
  std::optional<std::filesystem::path> find_resumable(std::vector<std::string>* skipped) const;
  // The name `latest` points to; "" when there is none or its content is not
  // a valid checkpoint name (see latest_problem).
  std::string latest() const;
  // Why the content of `latest` is ignored ("" when it is fine or absent).
  std::string latest_problem() const;

  // The one rule for checkpoint names, used by save, remove, resume and the
  // listing of work_dir: [A-Za-z0-9_][A-Za-z0-9_.-]*, at most 200 characters,
  // not "latest", not containing ".tmp-" or ".old-" and not ending in ".tmp"
  // (the names of temporaries, which resume never picks).
  static bool valid_name(const std::string& name);
  // Why `name` is not valid ("" when it is), for messages.
  static std::string name_problem(const std::string& name);

  // See meta_digest() below.
  std::string meta_digest(const std::filesystem::path& dir) const;

 private:
  // Save of each file (stems checked) / Flush; errors prefixed with `context`.
  void save_each(const std::filesystem::path& tmp, const std::vector<CheckpointFile>& files,
                 const std::string& context);
  void flush_with(const std::string& context);
  // Writes meta.json into `tmp` and work_dir/latest.tmp (naming `name`),
  // handed to the disk, not yet durable.
  void write_meta(const std::string& name, const std::filesystem::path& tmp,
                  const std::string& meta_json);
  // Once the files are durable and write_meta() has run: fsyncs meta.json,
  // `tmp` and latest.tmp, swaps `tmp` in for <name>, renames latest.tmp to
  // latest, fsyncs work_dir, removes what was swapped out. Removes `tmp`
  // and latest.tmp when it fails before the new checkpoint has its name (and
  // throws); a failure after that is a warning (latest_not_updated).
  std::filesystem::path publish_written(const std::string& name, const std::filesystem::path& tmp);
  // What is published and what `latest` names after the rename of latest.tmp
  // over it failed with `why` (a warning); removes latest.tmp, and `latest`
  // when it names an older checkpoint.
  void latest_not_updated(const std::string& name, const std::error_code& why);

  std::filesystem::path work_dir_;
  host::CheckpointIoInstance& io_;
  std::unique_ptr<BackgroundRemover> remover_;
};

}  // namespace rh::checkpoint

#include "checkpoint/CheckpointStore.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>

#include "abi/ComponentInstances.hpp"
#include "abi/HostError.hpp"
#include "abi/PluginCall.hpp"
#include "abi/StateDict.hpp"
#include "checkpoint/BackgroundRemover.hpp"
#include "checkpoint/CheckpointMeta.hpp"
#include "common/FaultInjection.hpp"

namespace fs = std::filesystem;

namespace rh::checkpoint {
namespace {

[[noreturn]] void io_error(const std::string& what, int err) {
  throw host::HostError(RH_ERROR_IO, what + ": " + std::strerror(err));
}

void fsync_path(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) io_error("cannot open " + p.string() + " to fsync it", errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) io_error("cannot fsync " + p.string(), err);
}

// Writes `content` to `p` and hands it to the disk (sync_file_range WRITE),
// not yet durable: fsync_path makes it so. Two files written this way before
// the first fsync share one journal commit.
void write_file(const fs::path& p, const std::string& content) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error("cannot create " + p.string(), errno);
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      io_error("cannot write " + p.string(), err);
    }
    done += static_cast<size_t>(n);
  }
  ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
  if (::close(fd) != 0) io_error("cannot write " + p.string(), errno);
}

// The content of `latest` and, when it is not to be followed, why (below).
std::string read_latest(const fs::path& work_dir, std::string* problem);

// A crash at this step of the publish: SIGKILL, so nothing (no destructor,
// no catch block) gets to tidy up, as with a power cut or the OOM killer.
void publish_step(const char* step) {
  if (common::fault_injected(std::string("ckpt_publish:") + step)) std::raise(SIGKILL);
}

// renameat2(RENAME_EXCHANGE); -1 with errno as the kernel sets it.
int exchange_paths(const fs::path& a, const fs::path& b) {
  if (common::fault_injected("ckpt_no_exchange")) {
    errno = EINVAL;
    return -1;
  }
#ifdef RENAME_EXCHANGE
  return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE);
#else
  return static_cast<int>(
      ::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), 1 << 1));
#endif
}

// A fresh temporary name for checkpoint `name`: <name>.tmp-<pid>-<n>.
fs::path temporary_path(const fs::path& work_dir, const std::string& name) {
  static std::atomic<int> counter{0};
  return work_dir / (name + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

// fs::rename; tests only: RH_FAULT_INJECT=<item> makes it fail with EIO
// instead, renaming nothing.
void rename_path(const fs::path& from, const fs::path& to, std::error_code& ec, const char* item) {
  if (common::fault_injected(item)) {
    ec = std::make_error_code(std::errc::io_error);
    return;
  }
  fs::rename(from, to, ec);
}

// True when the temporaries of process `pid` are no save's in progress: it
// no longer runs, or it is this process, which calls this only between
// saves (begin(), and resume before the first save).
bool left_behind(long pid) {
  if (pid == static_cast<long>(::getpid())) return true;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// <name>.tmp-<pid>-<n>-old: where the two-rename replacement (a file system
// without RENAME_EXCHANGE) puts the previous checkpoint <name> while the new
// one takes its name. Group 1 is <name>, group 2 the pid.
const std::regex& moved_aside_pattern() {
  static const std::regex kAside("(.+)\\.tmp-([0-9]+)-[0-9]+-old");
  return kAside;
}

// Puts back every checkpoint that a replacement moved aside and did not
// finish with (killed between its two renames, or the new one's rename and
// the rollback both failed): with no <name>, the moved-aside directory is the
// only copy of a published checkpoint, never to be removed as a leftover. A
// live other process's are left alone (its save is in flight). Returns
// nothing: what it did, or could not do, is logged.
void recover_moved_aside(const fs::path& work_dir) {
  std::vector<std::pair<fs::path, std::string>> found;  // (moved-aside dir, name)
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(work_dir, ec)) {
    const std::string file = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(file, m, moved_aside_pattern())) continue;
    if (!CheckpointStore::valid_name(m[1].str())) continue;
    if (!left_behind(std::strtol(m[2].str().c_str(), nullptr, 10))) continue;
    found.emplace_back(entry.path(), m[1].str());
  }
  for (const auto& [aside, name] : found) {
    const fs::path dir = work_dir / name;
    std::error_code st;
    if (fs::exists(fs::symlink_status(dir, st))) continue;  // replaced: a leftover
    std::error_code mv;
    fs::rename(aside, dir, mv);
    if (mv)
      spdlog::warn(
          "checkpoint '{}' is at {}, where a replacement that did not finish moved it, and "
          "cannot be put back: {}; it is kept there (rename it to {} to resume from it)",
          name, aside.string(), mv.message(), dir.string());
    else
      spdlog::warn(
          "put checkpoint '{}' back from {}, where a replacement that did not finish "
          "had moved it",
          name, aside.string());
  }
}

// Removes `<name>.tmp-<pid>-...` left by a process that no longer runs (a
// killed save: a half-written new one, the old one after the exchange, or
// a removed one whose deletion was cut short).
// A live process's temporaries (another job in the same work_dir) are left,
// and so is a moved-aside <name> while no <name> exists (recover_moved_aside
// could not put it back: the only copy of a published checkpoint).
void remove_leftovers(const fs::path& work_dir, const std::string& name) {
  const std::string prefix = name + ".tmp-";
  std::error_code ec;
  const bool published = fs::exists(fs::symlink_status(work_dir / name, ec));
  for (const auto& entry : fs::directory_iterator(work_dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = file.substr(prefix.size());
    const size_t digits = rest.find_first_not_of("0123456789");
    if (digits == 0 || rest.empty()) continue;
    if (!left_behind(std::strtol(rest.substr(0, digits).c_str(), nullptr, 10))) continue;
    if (!published && std::regex_match(file, moved_aside_pattern())) continue;
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (rm)
      spdlog::warn("cannot remove {} left by an interrupted save: {}", entry.path().string(),
                   rm.message());
    else
      spdlog::info("removed {}, left by an interrupted save", entry.path().string());
  }
}

rh_CheckpointFileArgs file_args(const fs::path& dir_path, const std::string& dir,
                                const std::string& stem, rh_StateDict* dict) {
  (void)dir_path;
  return rh_CheckpointFileArgs{RH_CHECKPOINT_FILE_ARGS_STRUCT_SIZE,
                               {dir.data(), dir.size()},
                               {stem.data(), stem.size()},
                               dict};
}

}  // namespace

CheckpointStore::CheckpointStore(fs::path work_dir, host::CheckpointIoInstance& io)
    : work_dir_(std::move(work_dir)), io_(io), remover_(std::make_unique<BackgroundRemover>()) {}

CheckpointStore::~CheckpointStore() = default;  // ~BackgroundRemover waits

void CheckpointStore::wait_for_removals() { remover_->wait(); }

std::string CheckpointStore::name_problem(const std::string& name) {
  if (!plain_name(name))
    return "'" + name +
           "' is not a checkpoint name ([A-Za-z0-9_][A-Za-z0-9_.-]*, at most 200 characters)";
  if (name == "latest") return "'latest' is reserved (the pointer file)";
  for (const char* part : {".tmp-", ".old-"})
    if (name.find(part) != std::string::npos)
      return "'" + name + "' contains '" + part + "', reserved for temporaries";
  if (name.size() >= 4 && name.compare(name.size() - 4, 4, ".tmp") == 0)
    return "'" + name + "' ends in '.tmp', reserved for temporaries";
  return "";
}

bool CheckpointStore::valid_name(const std::string& name) { return name_problem(name).empty(); }

std::string CheckpointStore::meta_digest(const fs::path& dir) const {
  return checkpoint::meta_digest(dir);
}

bool CheckpointStore::saves_in_background() const { return io_.saves_in_background(); }

void CheckpointStore::queue_files(const fs::path& tmp, const std::vector<CheckpointFile>& files) {
  save_each(tmp, files, tmp.string());
}

void CheckpointStore::flush(const fs::path& tmp) { flush_with(tmp.string()); }

void CheckpointStore::save_each(const fs::path& tmp, const std::vector<CheckpointFile>& files,
                                const std::string& context) {
  const std::string tmp_str = tmp.string();
  for (const CheckpointFile& f : files) {
    if (!plain_name(f.stem))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            "checkpoint file stem '" + f.stem + "' is not a plain file name");
    rh_CheckpointFileArgs args = file_args(tmp, tmp_str, f.stem, f.dict);
    rh_Error* err = io_.save(args);
    host::throw_if_error(err, context + ": " + io_.what() + " Save of '" + f.stem + "'");
  }
}

void CheckpointStore::flush_with(const std::string& context) {
  // Tests only: a flush that fails after meta.json and latest.tmp are written.
  if (common::fault_injected("ckpt_flush:fail"))
    throw host::HostError(
        RH_ERROR_IO, context + ": " + io_.what() + " Flush: injected failure (RH_FAULT_INJECT)");
  rh_Error* err = io_.flush();
  host::throw_if_error(err, context + ": " + io_.what() + " Flush");
}

void CheckpointStore::write_files(const fs::path& tmp, const std::vector<CheckpointFile>& files) {
  queue_files(tmp, files);
  flush(tmp);
}

fs::path CheckpointStore::begin(const std::string& name) {
  const std::string problem = name_problem(name);
  if (!problem.empty())
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, "invalid checkpoint name: " + problem);
  // The space the removals free is there for this save, and none of them
  // runs beside remove_leftovers.
  remover_->wait();
  const fs::path tmp = temporary_path(work_dir_, name);
  std::error_code ec;
  fs::create_directories(work_dir_, ec);
  if (ec) io_error("cannot create work_dir " + work_dir_.string(), ec.value());
  recover_moved_aside(work_dir_);
  remove_leftovers(work_dir_, name);
  if (!fs::create_directory(tmp, ec) || ec)
    io_error("cannot create checkpoint directory " + tmp.string(), ec ? ec.value() : EEXIST);
  return tmp;
}

void CheckpointStore::abandon(const fs::path& tmp) {
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::remove(work_dir_ / "latest.tmp", ec);  // the save's, when it got that far
}

// tools/bench/SaveFileOpsBench.cpp replays this sequence of file operations
// (with the safetensors plugin's) to measure what the storage takes: a
// change here belongs there too.
fs::path CheckpointStore::save(const std::string& name, const std::vector<CheckpointFile>& files,
                               const std::function<std::string()>& meta_json,
                               const std::function<void(const fs::path&)>& before_meta) {
  const std::string problem = name_problem(name);
  if (!problem.empty())
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, "invalid checkpoint name: " + problem);
  for (const CheckpointFile& f : files)
    if (!plain_name(f.stem))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT, "checkpoint '" + name + "': file stem '" +
                                                           f.stem + "' is not a plain file name");
  const fs::path tmp = begin(name);
  try {
    save_each(tmp, files, "checkpoint '" + name + "'");
    if (before_meta) before_meta(tmp);
    // The files are complete when Save returns (durable only after Flush),
    // so meta.json and latest.tmp go to the disk before the plugin's
    // fsyncs: their blocks are then in the journal commit those fsyncs
    // make, and the fsyncs publish_written() adds find little left to do.
    // Measured (the quickstart saving every epoch, 96 saves alternating
    // with the old order, this VM's ext4): 5.7 ms a save against 6.5 ms.
    write_meta(name, tmp, meta_json());
    flush_with("checkpoint '" + name + "'");
  } catch (...) {
    abandon(tmp);
    throw;
  }
  return publish_written(name, tmp);
}

void CheckpointStore::write_meta(const std::string& name, const fs::path& tmp,
                                 const std::string& meta_json) {
  // `latest` is written before the exchange so that one fsync of work_dir
  // (publish_written) makes both renames durable.
  write_file(tmp / "meta.json", meta_json);
  write_file(work_dir_ / "latest.tmp", name + "\n");
}

fs::path CheckpointStore::publish(const std::string& name, const fs::path& tmp,
                                  const std::string& meta_json) {
  try {
    write_meta(name, tmp, meta_json);
  } catch (...) {
    abandon(tmp);
    throw;
  }
  return publish_written(name, tmp);
}

fs::path CheckpointStore::publish_written(const std::string& name, const fs::path& tmp) {
  const fs::path final_dir = work_dir_ / name;
  std::error_code ec;
  // Where the previous checkpoint of that name is once the new one has the
  // name (removed at the end), or empty when there was none.
  fs::path replaced;
  try {
    publish_step("files_written");
    // The files are durable (flushed), meta.json and latest.tmp written, not
    // yet durable. A crash before the fsync of work_dir below keeps either
    // rename or both; file systems that journal metadata in order (ext4,
    // xfs) never keep `latest` without the exchange before it, and on one
    // that did, `latest` would name a checkpoint that does not verify, which
    // resume skips for the newest one that does.
    fsync_path(tmp / "meta.json", false);
    fsync_path(tmp, true);
    publish_step("meta_written");
    fsync_path(work_dir_ / "latest.tmp", false);
    publish_step("latest_tmp_written");
    // Publish. The old checkpoint of that name is swapped out in the same
    // step the new one comes in, so the name never points at nothing and
    // the new one is never mixed with the old one's files.
    const fs::file_status existing = fs::symlink_status(final_dir, ec);
    if (fs::exists(existing)) {
      if (!fs::is_directory(existing))
        throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                              "cannot publish checkpoint " + final_dir.string() +
                                  ": something that is not a directory has that name");
      if (exchange_paths(tmp, final_dir) == 0) {
        replaced = tmp;  // the previous one, no longer named
      } else {
        const int err = errno;
        if (err != EINVAL && err != ENOSYS)
          io_error("cannot exchange " + tmp.string() + " with " + final_dir.string(), err);
        // The file system cannot exchange (EINVAL): two renames, with a
        // moment in between where <name> does not exist.
        spdlog::warn(
            "{}: the file system does not support renameat2(RENAME_EXCHANGE); replacing "
            "checkpoint '{}' is not atomic (a crash between two renames leaves it at a "
            "temporary name, which resume: auto and the next save put back)",
            work_dir_.string(), name);
        const fs::path aside = tmp.string() + "-old";
        fs::rename(final_dir, aside, ec);
        if (ec) io_error("cannot move the previous " + final_dir.string() + " aside", ec.value());
        publish_step("moved_aside");
        rename_path(tmp, final_dir, ec, "ckpt_rename:fail");
        if (ec) {
          std::error_code back;
          rename_path(aside, final_dir, back, "ckpt_rollback:fail");
          if (back)
            throw host::HostError(
                RH_ERROR_IO,
                "cannot publish checkpoint " + final_dir.string() + ": cannot rename " +
                    tmp.string() + " to it: " + ec.message() + "; and the previous checkpoint '" +
                    name + "', moved aside to " + aside.string() +
                    ", cannot be put back: " + back.message() +
                    ". It is kept there, not removed: the next save or resume: auto puts it "
                    "back (or rename it to " +
                    final_dir.string() + ")");
          io_error("cannot publish checkpoint " + final_dir.string() +
                       " (the previous one is back in its place)",
                   ec.value());
        }
        replaced = aside;
      }
    } else {
      rename_path(tmp, final_dir, ec, "ckpt_rename:fail");
      if (ec) io_error("cannot publish checkpoint " + final_dir.string(), ec.value());
    }
  } catch (...) {
    abandon(tmp);  // the new one, never published
    throw;
  }
  publish_step("exchanged");
  // From here on the checkpoint is published: what fails now is said as it
  // is, and the save counts as done (the run goes on; resume takes this
  // checkpoint or says why not). Point `latest` at it, atomically.
  rename_path(work_dir_ / "latest.tmp", work_dir_ / "latest", ec, "ckpt_latest:fail");
  if (ec) latest_not_updated(name, ec);
  try {
    if (common::fault_injected("ckpt_fsync_work_dir:fail"))
      io_error("cannot fsync " + work_dir_.string(), EIO);
    fsync_path(work_dir_, true);
  } catch (const host::HostError& e) {
    spdlog::warn(
        "checkpoint '{}' is published ({}), but {}: the renames that published it may not "
        "survive a crash of the machine (resume: auto would then take the newest checkpoint "
        "that did). The save counts as done; the run goes on and the next save fsyncs {} again",
        name, final_dir.string(), e.what(), work_dir_.string());
  }
  publish_step("latest_updated");
  // The previous checkpoint, no longer named, or nothing.
  if (!replaced.empty()) {
    fs::remove_all(replaced, ec);
    if (ec)
      spdlog::warn("cannot remove the replaced checkpoint {}: {} (the next save of '{}' retries)",
                   replaced.string(), ec.message(), name);
  }
  publish_step("old_removed");
  return final_dir;
}

void CheckpointStore::latest_not_updated(const std::string& name, const std::error_code& why) {
  const fs::path latest = work_dir_ / "latest";
  const std::string failure = "cannot rename " + (work_dir_ / "latest.tmp").string() + " to " +
                              latest.string() + ": " + why.message();
  const std::string published =
      "checkpoint '" + name + "' is published (" + (work_dir_ / name).string() + ")";
  std::error_code ec;
  fs::remove(work_dir_ / "latest.tmp", ec);
  const std::string before = read_latest(work_dir_, nullptr);
  if (before == name) {
    spdlog::warn(
        "{} and `latest` already names it; rewriting it failed ({}), which changes "
        "nothing. The save counts as done and the run goes on",
        published, failure);
    return;
  }
  const bool existed = fs::exists(fs::symlink_status(latest, ec));
  // An older checkpoint named by `latest` would be what resume: auto takes:
  // without `latest` it takes the newest valid checkpoint by iteration.
  std::string removal;
  if (existed && common::fault_injected("ckpt_latest_remove:fail"))
    removal = std::strerror(EIO);
  else if (existed && ::unlink(latest.c_str()) != 0)
    removal = std::strerror(errno);
  if (existed && !removal.empty() && before.empty()) {
    spdlog::warn(
        "{}, but `latest` cannot name it: {}, and {} cannot be removed either: {}. It names no "
        "checkpoint (it is not a file, or its content is not a checkpoint name), so resume: auto "
        "ignores it and takes the newest valid checkpoint by iteration. The save counts as done "
        "and the run goes on",
        published, failure, latest.string(), removal);
    return;
  }
  if (existed && !removal.empty()) {
    spdlog::warn(
        "{}, but `latest` still names '{}': {}, and it cannot be removed either: {}. resume: "
        "auto would continue from '{}' until a later save updates `latest`; to continue from "
        "this checkpoint write '{}' into {} or set resume: {}. The save counts as done and the "
        "run goes on",
        published, before, failure, removal, before, name, latest.string(),
        (work_dir_ / name).string());
    return;
  }
  std::string now;
  if (!existed)
    now = "There is no `latest`: resume: auto takes the newest valid checkpoint by iteration.";
  else if (before.empty())
    now =
        "`latest`, whose content named no checkpoint, is removed: resume: auto takes the "
        "newest valid checkpoint by iteration.";
  else
    now = "`latest`, which named '" + before +
          "', is removed, so that resume: auto takes the newest valid checkpoint by iteration "
          "rather than that one.";
  spdlog::warn(
      "{}, but `latest` cannot name it: {}. {} The save counts as done; the run goes on and the "
      "next save writes `latest` again",
      published, failure, now);
}

void CheckpointStore::remove(const std::string& name) {
  const std::string problem = name_problem(name);
  if (!problem.empty())
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, "invalid checkpoint name: " + problem);
  if (name == latest())
    throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                          "refusing to remove checkpoint '" + name + "': `latest` points to it");
  const fs::path dir = work_dir_ / name;
  // Out of the checkpoints' names at once; the files go in the background.
  const fs::path doomed = temporary_path(work_dir_, name);
  std::error_code ec;
  fs::rename(dir, doomed, ec);
  if (ec == std::errc::no_such_file_or_directory) return;  // already gone
  if (ec) io_error("cannot remove checkpoint " + dir.string(), ec.value());
  remover_->remove(doomed, "checkpoint '" + name + "', removed");
}

bool CheckpointStore::load_slices(const fs::path& dir, const std::string& stem,
                                  const std::vector<rh_CheckpointSlice>& slices,
                                  rh_StateDict& out) const {
  if (!io_.has_load_slices()) return false;
  const std::string dir_str = dir.string();
  rh_CheckpointFileArgs args = file_args(dir, dir_str, stem, &out);
  rh_Error* err = io_.load_slices(args, slices.data(), slices.size());
  if (err != nullptr && err->code == RH_ERROR_UNIMPLEMENTED) {  // a wrapper that cannot (1.6)
    delete err;
    return false;
  }
  host::throw_if_error(err, "checkpoint " + dir_str);
  return true;
}

void CheckpointStore::load(const fs::path& dir, const std::string& stem, rh_StateDict& out) const {
  const std::string dir_str = dir.string();
  rh_CheckpointFileArgs args = file_args(dir, dir_str, stem, &out);
  rh_Error* err = io_.load(args);
  host::throw_if_error(err, "checkpoint " + dir_str);
}

std::string CheckpointStore::verify(const fs::path& dir) const {
  try {
    CheckpointMeta meta = read_meta(dir);
    const std::string dir_str = dir.string();
    for (const std::string& stem : meta.files) {
      rh_CheckpointFileArgs args = file_args(dir, dir_str, stem, nullptr);
      try {
        if (io_.has_verify()) {
          host::throw_if_error(io_.verify(args), "");
        } else {
          rh_StateDict scratch;
          load(dir, stem, scratch);
        }
      } catch (const host::HostError& e) {
        // Which logical tensors the damaged file holds shards of.
        std::string held;
        size_t n = 0;
        for (const auto& [name, t] : meta.tensors)
          for (const ShardRef& shard : t.shards)
            if (shard.file == stem) {
              if (n < 3) held += (n ? ", '" : "'") + name + "'";
              ++n;
              break;
            }
        if (n == 0) throw;
        throw host::HostError(e.code(), std::string(e.what()) + " (it holds shards of " +
                                            std::to_string(n) + " tensor(s): " + held +
                                            (n > 3 ? ", ..." : "") + ")");
      }
    }
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

namespace {
// The content of `latest` and, when it is not to be followed, why.
std::string read_latest(const fs::path& work_dir, std::string* problem) {
  const fs::path p = work_dir / "latest";
  std::error_code ec;
  const fs::file_status status = fs::status(p, ec);
  if (!fs::exists(status)) return "";
  if (!fs::is_regular_file(status)) {  // reading a directory would throw
    if (problem) *problem = p.string() + ": ignored, it is not a file";
    return "";
  }
  std::ifstream in(p, std::ios::binary);
  if (!in) return "";
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!content.empty() && content.back() == '\n') content.pop_back();
  const std::string why = CheckpointStore::name_problem(content);
  if (why.empty()) return content;
  if (problem)
    *problem = p.string() + ": ignored, its content is not a checkpoint of " + work_dir.string() +
               ": " + why;
  return "";
}
}  // namespace

std::string CheckpointStore::latest() const { return read_latest(work_dir_, nullptr); }

std::string CheckpointStore::latest_problem() const {
  std::string problem;
  read_latest(work_dir_, &problem);
  return problem;
}

std::optional<fs::path> CheckpointStore::find_resumable(std::vector<std::string>* skipped) const {
  auto note = [&](const fs::path& d, const std::string& why) {
    if (skipped) skipped->push_back(d.string() + ": " + why);
  };
  std::error_code ec;
  if (!fs::is_directory(work_dir_, ec)) return std::nullopt;
  // A checkpoint an unfinished replacement moved aside is one to resume from.
  recover_moved_aside(work_dir_);
  std::string latest_why;
  const std::string pointed = read_latest(work_dir_, &latest_why);
  if (!latest_why.empty() && skipped) skipped->push_back(latest_why);
  if (!pointed.empty()) {
    std::string why = verify(work_dir_ / pointed);
    if (why.empty()) return work_dir_ / pointed;
    note(work_dir_ / pointed, why);
  }
  // Every other published checkpoint, newest (by iteration) first.
  std::vector<std::pair<int64_t, fs::path>> candidates;
  for (const auto& entry : fs::directory_iterator(work_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    // Temporaries (`.tmp-`), old-style `.old-` leftovers and other files are
    // not checkpoints: the same rule as save's.
    if (!entry.is_directory() || !valid_name(name) || name == pointed) continue;
    try {
      candidates.emplace_back(read_meta(entry.path()).iter, entry.path());
    } catch (const std::exception& e) {
      note(entry.path(), e.what());
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  });
  for (const auto& [iter, dir] : candidates) {
    std::string why = verify(dir);
    if (why.empty()) return dir;
    note(dir, why);
  }
  return std::nullopt;
}

}  // namespace rh::checkpoint

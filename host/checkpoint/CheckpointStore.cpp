#include "checkpoint/CheckpointStore.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

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

#include "checkpoint/BackgroundRemover.hpp"
#include "common/FaultInjection.hpp"
#include "plugins/ComponentFactory.hpp"
#include "plugins/HostError.hpp"
#include "plugins/PluginCall.hpp"
#include "plugins/StateDict.hpp"

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

// Plain-name rule shared by checkpoint names and file stems: it cannot leave
// the directory, hide itself or carry odd bytes.
bool plain_name(const std::string& name) {
  static const std::regex kName("[A-Za-z0-9_][A-Za-z0-9_.-]*");
  return name.size() <= 200 && std::regex_match(name, kName);
}

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

// Removes `<name>.tmp-<pid>-...` left by a process that no longer runs (a
// killed save: a half-written new one, the old one after the exchange, or
// a removed one whose deletion was cut short).
// A live process's temporaries (another job in the same work_dir) are left.
void remove_leftovers(const fs::path& work_dir, const std::string& name) {
  const std::string prefix = name + ".tmp-";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(work_dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = file.substr(prefix.size());
    const size_t digits = rest.find_first_not_of("0123456789");
    if (digits == 0 || rest.empty()) continue;
    const long pid = std::strtol(rest.substr(0, digits).c_str(), nullptr, 10);
    const bool dead = ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    if (pid != ::getpid() && !dead) continue;
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

CheckpointMeta read_meta(const fs::path& dir) {
  fs::path p = dir / "meta.json";
  if (!fs::exists(p))
    throw host::HostError(RH_ERROR_DATA_LOSS,
                          p.string() + " is missing (an incomplete checkpoint)");
  try {
    YAML::Node meta = YAML::LoadFile(p.string());  // JSON is YAML
    CheckpointMeta m;
    m.format_version = meta["format_version"].as<int>();
    m.iter = meta["iter"].as<int64_t>();
    for (const auto& f : meta["files"]) m.files.push_back(f.as<std::string>());
    if (m.format_version >= 2) {
      if (meta["strategy"]) m.strategy = meta["strategy"].as<std::string>();
      if (meta["world_size"]) m.world_size = meta["world_size"].as<int64_t>();
      try {
        m.tensors = parse_index(meta["tensors"]);
      } catch (const std::invalid_argument& e) {
        throw host::HostError(RH_ERROR_DATA_LOSS, p.string() + ": " + e.what());
      }
      for (const auto& [name, t] : m.tensors)
        for (const ShardRef& s : t.shards)
          if (std::find(m.files.begin(), m.files.end(), s.file) == m.files.end())
            throw host::HostError(RH_ERROR_DATA_LOSS, p.string() + ": tensor '" + name +
                                                          "' has a shard in '" + s.file +
                                                          "', which \"files\" does not list");
    }
    if (meta["config"]) m.config = meta["config"].as<std::string>();
    for (const std::string& stem : m.files) {
      if (!plain_name(stem))
        throw host::HostError(RH_ERROR_DATA_LOSS,
                              "checkpoint " + dir.string() + ": meta.json lists the file stem '" +
                                  stem +
                                  "', which is not a plain file name ([A-Za-z0-9_.-], not "
                                  "starting with '.'); refusing to read it");
    }
    return m;
  } catch (const YAML::Exception& e) {
    throw host::HostError(RH_ERROR_DATA_LOSS, p.string() + " is corrupted: " + e.what());
  }
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
  std::ifstream in(p, std::ios::binary);
  if (!in) io_error("cannot open " + p.string(), errno);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) io_error("cannot read " + p.string(), errno);
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64: offset basis and prime
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

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
    rh_Error* err = host::call_plugin(io_.what() + " Save",
                                      [&] { return io_.vtable().Save(io_.handle(), &args); });
    host::throw_if_error(err, context + ": " + io_.what() + " Save of '" + f.stem + "'");
  }
}

void CheckpointStore::flush_with(const std::string& context) {
  // Tests only: a flush that fails after meta.json and latest.tmp are written.
  if (common::fault_injected("ckpt_flush:fail"))
    throw host::HostError(
        RH_ERROR_IO, context + ": " + io_.what() + " Flush: injected failure (RH_FAULT_INJECT)");
  if (io_.vtable().Flush == nullptr) return;
  rh_Error* err =
      host::call_plugin(io_.what() + " Flush", [&] { return io_.vtable().Flush(io_.handle()); });
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
  // After the exchange `tmp` holds the previous checkpoint, no longer named:
  // a later failure removing it (in the catch below) loses nothing.
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
      if (exchange_paths(tmp, final_dir) != 0) {
        const int err = errno;
        if (err != EINVAL && err != ENOSYS)
          io_error("cannot exchange " + tmp.string() + " with " + final_dir.string(), err);
        // The file system cannot exchange (EINVAL): two renames, with a
        // moment in between where <name> does not exist.
        spdlog::warn(
            "{}: the file system does not support renameat2(RENAME_EXCHANGE); replacing "
            "checkpoint '{}' is not atomic (a crash between two renames leaves no '{}'; "
            "resume: auto then takes the newest other valid checkpoint)",
            work_dir_.string(), name, name);
        const fs::path aside = tmp.string() + "-old";
        fs::rename(final_dir, aside, ec);
        if (ec) io_error("cannot move the previous " + final_dir.string() + " aside", ec.value());
        publish_step("moved_aside");
        fs::rename(tmp, final_dir, ec);
        if (ec) {
          std::error_code back;
          fs::rename(aside, final_dir, back);
          io_error("cannot publish checkpoint " + final_dir.string(), ec.value());
        }
        fs::rename(aside, tmp, ec);  // so the removal below finds it
        if (ec) io_error("cannot rename " + aside.string(), ec.value());
      }
    } else {
      fs::rename(tmp, final_dir, ec);
      if (ec) io_error("cannot publish checkpoint " + final_dir.string(), ec.value());
    }
    publish_step("exchanged");
    // Point `latest` at it, atomically.
    fs::rename(work_dir_ / "latest.tmp", work_dir_ / "latest", ec);
    if (ec) io_error("cannot update " + (work_dir_ / "latest").string(), ec.value());
    fsync_path(work_dir_, true);
    publish_step("latest_updated");
    // The previous checkpoint (at `tmp` after the exchange), or nothing.
    fs::remove_all(tmp, ec);
    if (ec)
      spdlog::warn("cannot remove the replaced checkpoint {}: {} (the next save of '{}' retries)",
                   tmp.string(), ec.message(), name);
    publish_step("old_removed");
  } catch (...) {
    abandon(tmp);  // before the exchange the new one, after it the old one
    throw;
  }
  return final_dir;
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
  const rh_CheckpointIoVtable& vt = io_.vtable();
  if (!RH_STRUCT_HAS(&vt, rh_CheckpointIoVtable, LoadSlices) || vt.LoadSlices == nullptr)
    return false;
  const std::string dir_str = dir.string();
  rh_CheckpointFileArgs args = file_args(dir, dir_str, stem, &out);
  rh_Error* err = host::call_plugin(io_.what() + " LoadSlices", [&] {
    return vt.LoadSlices(io_.handle(), &args, slices.data(), slices.size());
  });
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
  rh_Error* err = host::call_plugin(io_.what() + " Load",
                                    [&] { return io_.vtable().Load(io_.handle(), &args); });
  host::throw_if_error(err, "checkpoint " + dir_str);
}

std::string CheckpointStore::verify(const fs::path& dir) const {
  try {
    CheckpointMeta meta = read_meta(dir);
    const std::string dir_str = dir.string();
    for (const std::string& stem : meta.files) {
      rh_CheckpointFileArgs args = file_args(dir, dir_str, stem, nullptr);
      try {
        if (io_.vtable().Verify != nullptr) {
          rh_Error* err = host::call_plugin(
              io_.what() + " Verify", [&] { return io_.vtable().Verify(io_.handle(), &args); });
          host::throw_if_error(err, "");
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

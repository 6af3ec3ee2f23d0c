#include "checkpoint/CheckpointStore.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>

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

void write_file_durably(const fs::path& p, const std::string& content) {
  {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    if (!out) io_error("cannot create " + p.string(), errno);
    out << content;
    out.flush();
    if (!out) io_error("cannot write " + p.string(), errno);
  }
  fsync_path(p, false);
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
    return m;
  } catch (const YAML::Exception& e) {
    throw host::HostError(RH_ERROR_DATA_LOSS, p.string() + " is corrupted: " + e.what());
  }
}

CheckpointStore::CheckpointStore(fs::path work_dir, host::CheckpointIoInstance& io)
    : work_dir_(std::move(work_dir)), io_(io) {}

bool CheckpointStore::valid_name(const std::string& name) {
  static const std::regex kName("[A-Za-z0-9_][A-Za-z0-9_.-]*");
  return name != "latest" && std::regex_match(name, kName) &&
         name.find(".tmp-") == std::string::npos;
}

fs::path CheckpointStore::save(const std::string& name, const std::vector<CheckpointFile>& files,
                               const std::string& meta_json) {
  if (!valid_name(name))
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, "invalid checkpoint name '" + name + "'");
  static std::atomic<int> counter{0};
  const fs::path final_dir = work_dir_ / name;
  const fs::path tmp =
      work_dir_ / (name + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::error_code ec;
  try {
    fs::create_directories(work_dir_, ec);
    if (ec) io_error("cannot create work_dir " + work_dir_.string(), ec.value());
    if (!fs::create_directory(tmp, ec) || ec)
      io_error("cannot create checkpoint directory " + tmp.string(), ec ? ec.value() : EEXIST);
    const std::string tmp_str = tmp.string();
    for (const CheckpointFile& f : files) {
      rh_CheckpointFileArgs args =
          file_args(tmp, tmp_str, f.stem, const_cast<rh_StateDict*>(f.dict));
      rh_Error* err = host::call_plugin(io_.what() + " Save",
                                        [&] { return io_.vtable().Save(io_.handle(), &args); });
      host::throw_if_error(
          err, "checkpoint '" + name + "': " + io_.what() + " Save of '" + f.stem + "'");
    }
    if (io_.vtable().Flush != nullptr) {
      rh_Error* err = host::call_plugin(io_.what() + " Flush",
                                        [&] { return io_.vtable().Flush(io_.handle()); });
      host::throw_if_error(err, "checkpoint '" + name + "': " + io_.what() + " Flush");
    }
    write_file_durably(tmp / "meta.json", meta_json);
    fsync_path(tmp, true);
    // Publish. A checkpoint of the same name is replaced: moved aside first,
    // so the new one is never mixed with the old one's files.
    fs::path old;
    if (fs::exists(final_dir)) {
      old = work_dir_ / (name + ".old-" + std::to_string(::getpid()));
      fs::rename(final_dir, old, ec);
      if (ec) io_error("cannot move the previous " + final_dir.string() + " aside", ec.value());
    }
    fs::rename(tmp, final_dir, ec);
    if (ec) io_error("cannot publish checkpoint " + final_dir.string(), ec.value());
    fsync_path(work_dir_, true);
    if (!old.empty()) fs::remove_all(old, ec);
    // Point `latest` at it, atomically.
    write_file_durably(work_dir_ / "latest.tmp", name + "\n");
    fs::rename(work_dir_ / "latest.tmp", work_dir_ / "latest", ec);
    if (ec) io_error("cannot update " + (work_dir_ / "latest").string(), ec.value());
    fsync_path(work_dir_, true);
  } catch (...) {
    fs::remove_all(tmp, ec);
    fs::remove(work_dir_ / "latest.tmp", ec);
    throw;
  }
  return final_dir;
}

void CheckpointStore::remove(const std::string& name) {
  if (!valid_name(name))
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, "invalid checkpoint name '" + name + "'");
  if (name == latest())
    throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                          "refusing to remove checkpoint '" + name + "': `latest` points to it");
  std::error_code ec;
  fs::remove_all(work_dir_ / name, ec);
  if (ec) io_error("cannot remove checkpoint " + (work_dir_ / name).string(), ec.value());
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
      if (io_.vtable().Verify != nullptr) {
        rh_Error* err = host::call_plugin(io_.what() + " Verify",
                                          [&] { return io_.vtable().Verify(io_.handle(), &args); });
        host::throw_if_error(err, "");
      } else {
        rh_StateDict scratch;
        load(dir, stem, scratch);
      }
    }
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string CheckpointStore::latest() const {
  std::ifstream in(work_dir_ / "latest");
  std::string name;
  std::getline(in, name);
  return name;
}

std::optional<fs::path> CheckpointStore::find_resumable(std::vector<std::string>* skipped) const {
  auto note = [&](const fs::path& d, const std::string& why) {
    if (skipped) skipped->push_back(d.string() + ": " + why);
  };
  std::error_code ec;
  if (!fs::is_directory(work_dir_, ec)) return std::nullopt;
  std::string pointed = latest();
  if (!pointed.empty()) {
    std::string why = verify(work_dir_ / pointed);
    if (why.empty()) return work_dir_ / pointed;
    note(work_dir_ / pointed, why);
  }
  // Every other published checkpoint, newest (by iteration) first.
  std::vector<std::pair<int64_t, fs::path>> candidates;
  for (const auto& entry : fs::directory_iterator(work_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !valid_name(name) || name == pointed ||
        name.find(".old-") != std::string::npos)
      continue;
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

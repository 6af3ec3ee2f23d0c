// What a durable checkpoint save's file operations cost on a file system,
// apart from everything else a save does: the system calls runner-host's
// synchronous save makes (CheckpointStore::save around the safetensors
// plugin; `strace -f -e trace=%file,fsync,sync_file_range` of a quickstart
// save shows the same sequence), replayed with files of a checkpoint's
// sizes, against the same calls without sync_file_range and without any
// fsync nor sync_file_range (the page cache only).
//
//   build/bin/rh_bench_save_file_ops [--dir DIR] [--saves N] [--cpu N]
//                                    [--sizes BYTES,BYTES,...]
//
// Per save, in order: mkdir <name>.tmp; for each tensor file, create
// <file>.tmp, write, sync_file_range(WRITE), rename to <file>; write
// meta.json and work_dir/latest.tmp (each with sync_file_range(WRITE));
// fsync each tensor file and the directory (the plugin's Flush); fsync
// meta.json, the directory again and latest.tmp (the host's publish); rename
// the directory and latest.tmp into place; fsync work_dir. That is 8 fsyncs
// and 5 sync_file_range calls for 3 tensor files.
//
// Printed per variant: the median (and quartiles) of
//  - wall: how long a synchronous save's file operations hold the loop;
//  - CPU taken: how much less a thread spinning on the same CPU got done
//    while the save ran, in ms of its rate alone. Where the storage's work
//    costs the CPU (a virtual machine whose disk flushes take the vCPU), a
//    background save cannot hide this part from a loop sharing that CPU.
// The whole process is pinned to one CPU (--cpu, default the one it starts
// on), the variants alternate, and --dir (default $TMPDIR or /tmp) is the
// file system measured: put it where the job's work_dir is.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

enum class Durability { kAsRunnerHost, kNoSyncFileRange, kPageCacheOnly };

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what + ": " + std::strerror(errno));
}

int write_file(const fs::path& p, const std::vector<char>& bytes, size_t n, bool kick) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd >= 0, "cannot create " + p.string());
  check(::write(fd, bytes.data(), n) == static_cast<ssize_t>(n), "cannot write " + p.string());
  if (kick) ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
  return fd;
}

void fsync_fd(int fd, const fs::path& p) { check(::fsync(fd) == 0, "cannot fsync " + p.string()); }

void fsync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  check(fd >= 0, "cannot open " + p.string());
  fsync_fd(fd, p);
  ::close(fd);
}

// One save named `name` into `work`, its tensor files `sizes` bytes each.
void save(const fs::path& work, const std::string& name, const std::vector<size_t>& sizes,
          size_t meta_bytes, const std::vector<char>& bytes, Durability d) {
  const bool kick = d == Durability::kAsRunnerHost;
  const bool sync = d != Durability::kPageCacheOnly;
  const fs::path tmp = work / (name + ".tmp");
  check(::mkdir(tmp.c_str(), 0755) == 0, "cannot create " + tmp.string());
  std::vector<std::pair<int, fs::path>> files;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const fs::path file = tmp / ("file" + std::to_string(i) + ".safetensors");
    const fs::path part = file.string() + ".tmp";
    files.emplace_back(write_file(part, bytes, sizes[i], kick), file);
    check(::rename(part.c_str(), file.c_str()) == 0, "cannot rename " + part.string());
  }
  ::close(write_file(tmp / "meta.json", bytes, meta_bytes, kick));
  ::close(write_file(work / "latest.tmp", bytes, name.size() + 1, kick));
  for (auto& [fd, path] : files) {  // the plugin's Flush
    if (sync) fsync_fd(fd, path);
    ::close(fd);
  }
  if (sync) {
    fsync_path(tmp, true);
    fsync_path(tmp / "meta.json", false);  // the host's publish
    fsync_path(tmp, true);
    fsync_path(work / "latest.tmp", false);
  }
  const fs::path final_dir = work / name;
  check(::rename(tmp.c_str(), final_dir.c_str()) == 0, "cannot rename " + tmp.string());
  const fs::path latest_tmp = work / "latest.tmp", latest = work / "latest";
  check(::rename(latest_tmp.c_str(), latest.c_str()) == 0, "cannot rename " + latest_tmp.string());
  if (sync) fsync_path(work, true);
}

std::vector<size_t> parse_sizes(const std::string& text) {
  std::vector<size_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v == 0 || v > (1ull << 32))
      throw std::runtime_error("--sizes: expected byte counts 1..4 GiB separated by commas, got '" +
                               text + "'");
    out.push_back(static_cast<size_t>(v));
    start = comma + 1;
  }
  return out;
}

int parse_int(const std::string& flag, const std::string& text, int min) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min || v > 1000000)
    throw std::runtime_error(flag + ": expected a whole number >= " + std::to_string(min) +
                             ", got '" + text + "'");
  return static_cast<int>(v);
}

struct Quartiles {
  double p25, median, p75;
};
Quartiles quartiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 4], v[v.size() / 2], v[3 * v.size() / 4]};
}

}  // namespace

int main(int argc, char** argv) {
  const char* tmpdir = std::getenv("TMPDIR");
  fs::path dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  int saves = 60;
  int cpu = ::sched_getcpu();
  // The quickstart's checkpoint: model, optimizer and state files, meta.json.
  std::vector<size_t> sizes = {88808, 178488, 5762};
  const size_t meta_bytes = 5659;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (i + 1 >= argc) throw std::runtime_error("'" + a + "' needs a value, or is unknown");
      if (a == "--dir") {
        dir = argv[++i];
      } else if (a == "--saves") {
        saves = parse_int(a, argv[++i], 4);
      } else if (a == "--cpu") {
        cpu = parse_int(a, argv[++i], 0);
      } else if (a == "--sizes") {
        sizes = parse_sizes(argv[++i]);
      } else {
        throw std::runtime_error("unknown argument '" + a + "'");
      }
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    check(::sched_setaffinity(0, sizeof set, &set) == 0, "--cpu " + std::to_string(cpu));
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      throw std::runtime_error("--dir " + dir.string() + ": not a directory");
    const fs::path work = dir / ("rh-save-file-ops-" + std::to_string(::getpid()));
    check(::mkdir(work.c_str(), 0755) == 0, "cannot create " + work.string());
    size_t largest = meta_bytes;
    for (size_t s : sizes) largest = std::max(largest, s);
    const std::vector<char> bytes(largest, 'x');

    std::atomic<bool> stop{false};
    std::atomic<int64_t> spins{0};
    std::thread spinner([&] {  // the training loop's stand-in, on the same CPU
      int64_t n = 0;
      while (!stop.load(std::memory_order_relaxed))
        if ((++n & 1023) == 0) spins.fetch_add(1024, std::memory_order_relaxed);
    });
    const Durability kinds[] = {Durability::kAsRunnerHost, Durability::kNoSyncFileRange,
                                Durability::kPageCacheOnly};
    const char* names[] = {"as runner-host saves (8 fsync)", "without sync_file_range",
                           "no fsync, no sync_file_range"};
    std::vector<double> wall[3], taken[3];
    for (int s = 0; s < saves; ++s) {
      for (int k = 0; k < 3; ++k) {
        const int v = (k + s) % 3;  // alternating, so drift hits every variant alike
        // The spinner's rate alone, right before.
        const int64_t r0 = spins.load();
        const auto a0 = Clock::now();
        ::usleep(20000);
        const double rate = static_cast<double>(spins.load() - r0) /
                            std::chrono::duration<double, std::milli>(Clock::now() - a0).count();
        const int64_t s0 = spins.load();
        const auto t0 = Clock::now();
        save(work, "save_" + std::to_string(s) + "_" + std::to_string(v), sizes, meta_bytes, bytes,
             kinds[v]);
        wall[v].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        std::this_thread::yield();
        const double span = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        taken[v].push_back(span - static_cast<double>(spins.load() - s0) / rate);
      }
      if (s % 10 == 9)  // keep the directory small
        for (const auto& entry : fs::directory_iterator(work)) fs::remove_all(entry.path());
    }
    stop = true;
    spinner.join();
    fs::remove_all(work);
    size_t total = meta_bytes;
    for (size_t s : sizes) total += s;
    std::printf("%s: %d saves per variant of %zu files (%zu bytes) + latest, pinned to CPU %d\n",
                dir.c_str(), saves, sizes.size() + 1, total, cpu);
    std::printf("%-34s %-28s %s\n", "", "wall ms, median (p25-p75)",
                "CPU taken from a thread on the same CPU, ms");
    for (int v = 0; v < 3; ++v) {
      const Quartiles w = quartiles(wall[v]), t = quartiles(taken[v]);
      std::printf("%-34s %6.3f (%.3f-%.3f)          %6.3f (%.3f-%.3f)\n", names[v], w.median, w.p25,
                  w.p75, t.median, t.p25, t.p75);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rh_bench_save_file_ops: %s\n", e.what());
    return 1;
  }
  return 0;
}

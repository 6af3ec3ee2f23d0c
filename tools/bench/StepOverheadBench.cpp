// Runner overhead: runner-host's training loop, without hooks, with each
// shipped hook alone and with them together, against a bare LibTorch loop on
// the same model, data, optimizer and thread count.
//
//   build/bin/rh_bench_step_overhead [--config configs/quickstart.yaml] [--epochs 20]
//                                    [--rounds 7] [--cpus 1|0,1|none] [--only REGEX]
//                                    [--set KEY=VALUE ...]
//   (run by itself: --bare [--save-interval N --save-dir DIR])
//
// The bare loop builds the job's model, dataset, loader and optimizer with the
// code runner-host uses, then runs, for every epoch: next batch -> forward ->
// loss -> backward -> step -> zero_grad, and one validation pass at the end
// (runner-host validates once at the end of training, which its timing
// includes). runner-host runs the same job for the same epochs and reports
// its train loop's wall time (lifecycle, hook dispatch, metrics, strategy
// calls, the loader thread, and for the checkpoint hook its saves): the
// whole train loop per iteration, the hooks' cost included. Every figure
// comes from a fresh process (the bare loop too: this binary runs itself with
// --bare), so both sides start alike.
//
// How the noise is kept out. The development machine has 2 cores shared with
// other people's compilers, fuzzers and test runs; two processes of the same
// variant differed by up to +-20% there, unpinned:
// - Each measured process is pinned with taskset to one CPU, main thread and
//   loader thread together (--cpus; default auto: before each pair, the CPU
//   idlest over the last half second). Unpinned, the scheduler moves the two
//   threads between the cores and onto the core another job is using; pinned
//   to a fixed core, a pair is ruined whenever another job lands on that core
//   (measured: a fixed core under a fuzzer gave 0.65-1.69). On one core the
//   loader thread's work adds to the loop's, as it does for the bare loop:
//   the figure is what the whole loop costs per iteration, hooks included.
//   --cpus none runs unpinned (what a user sees on an idle machine),
//   --cpus LIST pins to a fixed list.
// - Paired A/B: every variant is run right next to a bare loop of its own,
//   the two in alternating order (bare first in one round, second in the
//   next), and its ratio is taken against that bare loop only: a pair takes
//   a few seconds, so slow drift (frequency, a long build) moves both sides
//   of a ratio alike. The variants' order is rotated by one per round.
// - Medians over rounds: a pair hit by a burst of other work is an outlier,
//   not the figure. The min-max spread says how noisy the machine was; a
//   ratio is only worth quoting when the spread is small next to the margin
//   (2-3%) and the load average printed before and after is below 1.
//   Wall-clock noise of another job sharing the core (or of the hypervisor)
//   is not removed by any of this: on a busy machine, compare instruction
//   counts instead (tools/bench/step_instructions.sh: callgrind on
//   runner-host and on this binary's --bare).
// Printed: every round's ratios, then per variant the median over rounds of
// ms/iteration and of the ratio, each with its spread (min-max), the time
// runner-host's `hooks:` line gives the hooks per iteration, and the load
// average before and after (a figure taken under load says so). Variants
// with checkpoint saves are printed again without the time the loop spent in
// them (each save's logged time; for `checkpoint_io: async`, what the loop
// waited): what the runner and its hooks cost per iteration apart from the
// saves, which are durable writes (fsync) whatever runs them. One variant
// saves through the async checkpoint IO, and one into a work_dir in memory
// (/dev/shm, tmpfs, where fsync has nothing to wait for): the runner's and
// the hooks' whole work, the saves' serialisation and file operations
// included, without what the storage takes to make them durable.
// The bare loop saving durably (--bare --save-interval N --save-dir DIR:
// after every N epochs, the model's and the optimizer's tensors in one
// torch::save archive, fsynced, renamed into place, the directory fsynced)
// is measured against the bare loop, and logger + metrics + checkpoint once
// more against it as its peer: a loop that checkpoints pays for durable
// writes whoever makes them, and this pair shows what the runner and its
// hooks cost beyond that.
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "config/JobLoader.hpp"
#include "data/DataLoader.hpp"
#include "launch/HeapPolicy.hpp"
#include "launch/ThreadPolicy.hpp"
#include "lifecycle/Evaluator.hpp"
#include "model/Model.hpp"
#include "optim/OptimWrapper.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// What a careful LibTorch user writes to checkpoint a loop: the model's and
// the optimizer's tensors in one torch::save archive, written aside,
// fsynced, renamed into place and the directory fsynced (2 fsyncs; the
// runner's safetensors save makes 8, for three files, meta.json and
// `latest`). The peer that shows what the checkpoint hook costs beyond a
// durable save of the same state.
void save_durably(const fs::path& dir, int64_t epoch, rh::model::Model& model,
                  rh::optim::OptimWrapper& optim) {
  torch::serialize::OutputArchive archive;
  for (const auto& t : model.named_parameters()) archive.write("model." + t.name, t.tensor);
  for (const auto& t : model.named_buffers()) archive.write("model." + t.name, t.tensor, true);
  for (const auto& t : optim.state_tensors(/*copy=*/false))
    archive.write("optim." + t.name, t.tensor);
  const fs::path file = dir / ("epoch_" + std::to_string(epoch) + ".pt");
  const fs::path tmp = file.string() + ".tmp";
  try {
    archive.save_to(tmp.string());
  } catch (const c10::Error& e) {
    throw std::runtime_error("--bare --save-interval: cannot write " + tmp.string() + ": " +
                             e.what_without_backtrace());
  }
  auto fsync_path = [](const fs::path& p, int flags) {
    const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
    const int rc = fd < 0 ? -1 : ::fsync(fd);
    const int err = errno;  // before close() can change it
    if (fd >= 0) ::close(fd);
    if (rc != 0)
      throw std::runtime_error("--bare --save-interval: cannot fsync " + p.string() + ": " +
                               std::strerror(err));
  };
  fsync_path(tmp, O_RDONLY);
  fs::rename(tmp, file);
  fsync_path(dir, O_RDONLY | O_DIRECTORY);
}

// ms per iteration of a bare loop over `epochs` epochs (and one validation);
// with save_interval > 0, saving durably (save_durably) into save_dir after
// every save_interval epochs, as the checkpoint hook does with `interval`.
double bare_loop(const rh::config::Node& job, const std::string& job_dir, int64_t epochs,
                 int64_t save_interval, const fs::path& save_dir) {
  const uint64_t seed = job.find("seed") ? static_cast<uint64_t>(job.find("seed")->as_int()) : 0;
  torch::manual_seed(seed);
  auto model = rh::model::build_model(*job.find("model"), seed, job_dir);
  const rh::config::Node& train = *job.find("data")->find("train");
  rh::data::DataLoader loader(rh::data::build_dataset(*train.find("dataset"), job_dir),
                              rh::data::loader_options(train, seed), 0, 1);
  const rh::config::Node* val = job.find("data")->find("val");
  std::unique_ptr<rh::data::DataLoader> val_loader;
  if (val != nullptr)
    val_loader = std::make_unique<rh::data::DataLoader>(
        rh::data::build_dataset(*val->find("dataset"), job_dir),
        rh::data::loader_options(*val, seed), 0, 1);
  std::vector<rh::optim::OptimParam> params;
  for (auto& p : model->named_parameters()) params.push_back({p.name, p.tensor, false});
  rh::optim::OptimWrapper optim(*job.find("optim_wrapper"), params);

  int64_t iters = 0;
  const auto t0 = Clock::now();
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    model->train(true);
    loader.start_epoch(epoch);
    while (auto batch = loader.next()) {
      at::Tensor logits = model->forward(batch->input);
      at::Tensor loss = rh::lifecycle::Evaluator::loss(model->task(), logits, batch->target);
      loss.backward();
      optim.step();
      optim.zero_grad();
      ++iters;
    }
    if (save_interval > 0 && (epoch + 1) % save_interval == 0)
      save_durably(save_dir, epoch + 1, *model, optim);
  }
  if (val_loader) {
    model->train(false);
    torch::NoGradGuard no_grad;
    rh::lifecycle::Evaluator evaluator(model->task(), val_loader->dataset().num_classes());
    val_loader->start_epoch(0);
    while (auto batch = val_loader->next())
      evaluator.add(model->forward(batch->input), batch->target);
    (void)evaluator.metrics();
  }
  return 1e3 * std::chrono::duration<double>(Clock::now() - t0).count() /
         static_cast<double>(iters);
}

// For /bin/sh: in single quotes, each ' written as '\''.
std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `cmd` with its output going to the file `log`, read once it has
// exited. Not through a pipe: each line written into a pipe wakes its reader
// (this bench), which the scheduler then runs on the writer's CPU, the one
// measured. Measured (quickstart, 20 epochs, logger interval 50 and
// metrics): the logger's 60 lines a run took 1.8 us/iteration of
// runner-host's loop with its output in a pipe, 1.0 with it in a file.
std::string run_and_capture(const std::string& cmd, const fs::path& log) {
  const std::string full = cmd + " > " + shell_quoted(log.string()) + " 2>&1";
  const int status = std::system(full.c_str());
  std::string output;
  if (FILE* f = std::fopen(log.c_str(), "rb")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) output.append(buf, n);
    std::fclose(f);
  }
  std::error_code ec;
  fs::remove(log, ec);
  if (status != 0) throw std::runtime_error("failed: " + cmd + "\n" + output);
  return output;
}

double parse_ms(const std::string& output, const std::regex& line, const std::string& cmd) {
  std::smatch m;
  if (!std::regex_search(output, m, line))
    throw std::runtime_error("no timing line in the output of " + cmd + ":\n" + output);
  return std::stod(m[1]);
}

struct Variant {
  Variant(std::string n, std::string h, std::string s)
      : name(std::move(n)), hooks(std::move(h)), sets(std::move(s)) {}
  std::string name;
  std::string hooks;          // YAML list; empty: the bare loop
  std::string sets;           // more --set arguments (e.g. the checkpoint IO)
  bool in_memory = false;     // work_dir on tmpfs (/dev/shm), not in the temporary directory
  int64_t save_interval = 0;  // the bare loop: save durably every N epochs (0: never)
  size_t peer = 0;            // the variant each run is paired with: the bare loop, or another
  std::vector<double> ms, ratio;
  // The loop's time without what it waited for checkpoint saves (the saves'
  // own logged times), per iteration, and its ratio: the per-iteration cost
  // of the runner and its hooks apart from the saves themselves.
  std::vector<double> ms_ex_saves, ratio_ex_saves;
  // runner-host's `hooks:` line: microseconds per iteration in the hooks'
  // handlers during the train loop, all together, and the last run's split.
  std::vector<double> hook_us;
  std::string hook_split;
};

// Seconds the loop spent in checkpoint saves: the logged time of each
// synchronous save (`saved checkpoint ... in S s,`) and what the loop
// waited for each background save (`the loop waited S s`).
double save_seconds(const std::string& output) {
  static const std::regex kSync("MB of tensors in ([0-9.]+) s,");
  static const std::regex kWaited("the loop waited ([0-9.]+) s");
  double total = 0;
  for (const std::regex* re : {&kSync, &kWaited})
    for (auto it = std::sregex_iterator(output.begin(), output.end(), *re);
         it != std::sregex_iterator(); ++it)
      total += std::stod((*it)[1]);
  return total;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Per CPU: (busy, total) jiffies since boot, from /proc/stat.
std::vector<std::pair<uint64_t, uint64_t>> cpu_jiffies() {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) throw std::runtime_error("--cpus auto: cannot read /proc/stat");
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned cpu = 0;
    unsigned long long v[8] = {};
    if (std::sscanf(line, "cpu%u %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
                    &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 9)
      continue;  // the "cpu " total line, or not a cpu line
    uint64_t total = 0;
    for (unsigned long long x : v) total += x;
    const uint64_t idle = v[3] + v[4];  // idle + iowait
    if (out.size() <= cpu) out.resize(cpu + 1);
    out[cpu] = {total - idle, total};
  }
  std::fclose(f);
  return out;
}

// The CPU that was idlest over the last half second: where the next pair of
// runs goes, away from another engineer's compiler or fuzzer.
int idlest_cpu() {
  const auto before = cpu_jiffies();
  ::usleep(500 * 1000);
  const auto after = cpu_jiffies();
  int best = 0;
  double best_busy = 2.0;
  for (size_t c = 0; c < after.size() && c < before.size(); ++c) {
    const double total = static_cast<double>(after[c].second - before[c].second);
    if (total <= 0) continue;
    const double busy = static_cast<double>(after[c].first - before[c].first) / total;
    if (busy < best_busy) {
      best_busy = busy;
      best = static_cast<int>(c);
    }
  }
  return best;
}

// Where the in-memory variant's work_dir goes: /dev/shm when it is a tmpfs,
// else nothing (the variant is then left out, and the run says so).
std::string memory_directory() {
  struct statfs st {};
  if (::statfs("/dev/shm", &st) != 0 || st.f_type != TMPFS_MAGIC) return "";
  return "/dev/shm";
}

std::string load_average() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "unknown";
  char buf[64] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::string text(buf, n);
  // "0.30 1.23 1.76 1/93 1234": the three averages.
  size_t end = 0;
  for (int spaces = 0; end < text.size() && spaces < 3; ++end)
    if (text[end] == ' ') ++spaces;
  return text.substr(0, end > 0 ? end - 1 : 0);
}

void print_spread(const std::vector<double>& v, const char* format) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  std::printf(format, median(v), *lo, *hi);
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP's threads wait as runner-host's do (launch/ThreadPolicy.hpp):
  // libgomp read OMP_WAIT_POLICY when this program (linked with LibTorch)
  // started, so a change takes a fresh start of the program.
  if (!rh::launch::apply_thread_policy().empty()) {
    ::execv("/proc/self/exe", argv);
    std::perror("rh_bench_step_overhead: execv /proc/self/exe");
    return 1;
  }
  // The bare loop keeps large blocks in the heap as runner-host does
  // (launch/HeapPolicy.hpp): the ratio is the runner's work, not malloc's.
  rh::launch::apply_heap_policy();
  std::string config = "configs/quickstart.yaml";
  // 20: a multiple of the checkpoint variants' interval (5), so they save
  // once per 5 epochs as the quickstart job does (epochs 5 and 10 of its 10).
  // 16 epochs, the earlier default, added a fourth save for the last epoch
  // right after the one of epoch 15: a quarter more saves per epoch.
  int64_t epochs = 20;
  int rounds = 7;
  std::string cpus = "auto";
  std::string only;
  std::vector<std::string> sets;  // --set: job overrides, for both sides
  bool bare_child = false;
  int64_t save_interval = 0;  // --bare: save durably every N epochs into --save-dir
  std::string save_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--bare") {
      bare_child = true;
    } else if (a == "--save-interval" && has_value) {  // with --bare
      save_interval = std::stoll(argv[++i]);
    } else if (a == "--save-dir" && has_value) {
      save_dir = argv[++i];
    } else if (a == "--config" && has_value) {
      config = argv[++i];
    } else if (a == "--epochs" && has_value) {
      epochs = std::stoll(argv[++i]);
    } else if (a == "--rounds" && has_value) {
      rounds = std::stoi(argv[++i]);
    } else if (a == "--cpus" && has_value) {
      cpus = argv[++i];
    } else if (a == "--only" && has_value) {
      only = argv[++i];
    } else if (a == "--set" && has_value) {
      sets.push_back(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--config job.yaml] [--epochs N] [--rounds N] [--cpus LIST|none] "
                   "[--only REGEX] [--set KEY=VALUE ...]\n"
                   "unknown or incomplete argument '%s'\n",
                   argv[0], a.c_str());
      return 2;
    }
  }
  if (epochs < 1 || rounds < 1) {
    std::fprintf(stderr, "--epochs and --rounds must be >= 1\n");
    return 2;
  }
  if (save_interval < 0 || (save_interval > 0 && (!bare_child || save_dir.empty()))) {
    std::fprintf(stderr, "--save-interval N (>= 1) goes with --bare and --save-dir DIR\n");
    return 2;
  }
  if (cpus.empty() || cpus.find_first_not_of("0123456789,-") != std::string::npos) {
    if (cpus != "none" && cpus != "auto") {
      std::fprintf(
          stderr,
          "--cpus: expected auto, none or a CPU list for taskset -c (1, 0,1, 0-1), got '%s'\n",
          cpus.c_str());
      return 2;
    }
  }
  try {
    rh::config::Job job = rh::config::load_job(config, sets);
    std::string set_args;  // the same overrides, for every child process
    for (const std::string& s : sets) set_args += " --set " + shell_quoted(s);
    const std::string job_dir = fs::absolute(config).parent_path().string();
    if (bare_child) {
      std::printf("bare loop: %.6f ms/iteration\n",
                  bare_loop(*job.root, job_dir, epochs, save_interval, save_dir));
      return 0;
    }
    const fs::path exe = fs::read_symlink("/proc/self/exe");
    const std::string runner = (exe.parent_path() / "runner-host").string();
    const fs::path work = fs::temp_directory_path() / ("rh-bench-" + std::to_string(::getpid()));
    const fs::path log = work.string() + ".log";  // each run's output
    constexpr int64_t kSaveInterval = 5;          // epochs, the quickstart's
    const std::string ckpt = "{type: checkpoint, interval: " + std::to_string(kSaveInterval) + "}";
    const std::string async_io =
        " --set " + shell_quoted("checkpoint_io={type: async, inner: {type: safetensors}}");
    const std::string lmc = "[{type: logger, interval: 50}, {type: metrics}, " + ckpt + "]";
    std::vector<Variant> variants = {
        {"bare LibTorch loop", "", ""},
        {"runner-host, no hooks", "[]", ""},
        {"logger (interval 50)", "[{type: logger, interval: 50}]", ""},
        {"metrics", "[{type: metrics}]", ""},
        {"checkpoint (interval 5)", "[" + ckpt + "]", ""},
        {"trace", "[{type: trace}]", ""},
        {"logger+metrics+checkpoint", lmc, ""},
        {"all four", "[{type: logger, interval: 50}, {type: metrics}, " + ckpt + ", {type: trace}]",
         ""},
        {"l+m+checkpoint, async IO", lmc, async_io},
        {"l+m+checkpoint, work_dir in memory", lmc, ""},
        {"bare loop saving durably (interval " + std::to_string(kSaveInterval) + ")", "", ""},
        {"l+m+checkpoint vs bare loop saving", lmc, ""},
    };
    const size_t memory_variant = variants.size() - 3, saving_bare = variants.size() - 2;
    variants[memory_variant].in_memory = true;
    variants[saving_bare].save_interval = kSaveInterval;
    variants.back().peer = saving_bare;
    const std::string memory = memory_directory();
    const fs::path memory_work =
        memory.empty() ? fs::path() : fs::path(memory) / ("rh-bench-" + std::to_string(::getpid()));
    std::regex only_re;
    try {
      only_re = std::regex(only.empty() ? "." : only);
    } catch (const std::regex_error& e) {
      throw std::runtime_error("--only: not a regular expression '" + only + "': " + e.what());
    }
    std::vector<size_t> measured;  // the variants compared with the bare loop
    for (size_t v = 1; v < variants.size(); ++v) {
      if (!std::regex_search(variants[v].name, only_re)) continue;
      if (variants[v].in_memory && memory_work.empty()) {
        std::printf("left out: '%s' (/dev/shm is not a tmpfs here)\n", variants[v].name.c_str());
        continue;
      }
      measured.push_back(v);
    }
    if (measured.empty()) throw std::runtime_error("--only '" + only + "' matches no variant");

    static const std::regex kBare("bare loop: ([0-9.]+) ms/iteration");
    static const std::regex kRunner(
        "train loop: [0-9]+ iterations in [0-9.]+ s \\(([0-9.]+) ms/iteration");
    static const std::regex kIterations("train loop: ([0-9]+) iterations in");
    static const std::regex kHooks(
        "hooks: ([0-9.]+) us/iteration during the train loop \\(([^)]*)\\)");
    std::string pin;  // the taskset prefix of the current pair
    // ms per iteration, and (runner-host) without the loop's time in saves.
    auto run_variant = [&](size_t v) -> std::pair<double, double> {
      std::string cmd;
      if (variants[v].hooks.empty()) {
        cmd = pin + shell_quoted(exe.string()) + " --bare --config " + shell_quoted(config) +
              " --epochs " + std::to_string(epochs) + set_args;
        if (variants[v].save_interval > 0) {
          fs::create_directories(work);
          cmd += " --save-interval " + std::to_string(variants[v].save_interval) + " --save-dir " +
                 shell_quoted(work.string());
        }
        const double ms = parse_ms(run_and_capture(cmd, log), kBare, cmd);
        fs::remove_all(work);
        return {ms, ms};
      }
      const fs::path& dir = variants[v].in_memory ? memory_work : work;
      cmd = pin + shell_quoted(runner) + " --config " + shell_quoted(config) + set_args +
            " --set " + shell_quoted("work_dir=" + dir.string()) + " --set " +
            shell_quoted("train_cfg={by_epoch: true, max_epochs: " + std::to_string(epochs) +
                         ", val_interval: 100000000}") +
            " --set " + shell_quoted("hooks=" + variants[v].hooks) + variants[v].sets;
      const std::string output = run_and_capture(cmd, log);
      const double ms = parse_ms(output, kRunner, cmd);
      const double iters = parse_ms(output, kIterations, cmd);
      std::smatch hooks;
      if (std::regex_search(output, hooks, kHooks)) {
        variants[v].hook_us.push_back(std::stod(hooks[1]));
        variants[v].hook_split = hooks[2];
      }
      fs::remove_all(dir);
      return {ms, ms - 1e3 * save_seconds(output) / iters};
    };

    std::printf(
        "%s: %lld epochs per run, %d rounds of paired A/B runs, %d intra-op thread(s)%s, %s, "
        "load average %s\n",
        config.c_str(), static_cast<long long>(epochs), rounds, at::get_num_threads(),
        std::getenv("OMP_NUM_THREADS") ? "" : " (OMP_NUM_THREADS unset)",
        cpus == "none"   ? "unpinned"
        : cpus == "auto" ? "each pair pinned to the idlest CPU (taskset -c)"
                         : ("each run pinned: taskset -c " + cpus).c_str(),
        load_average().c_str());
    std::fflush(stdout);
    for (int r = 0; r < rounds; ++r) {
      std::printf("round %d/%d ratios:", r + 1, rounds);
      for (size_t k = 0; k < measured.size(); ++k) {
        const size_t v = measured[(k + static_cast<size_t>(r)) % measured.size()];
        const size_t peer = variants[v].peer;
        const bool bare_first = (r + static_cast<int>(k)) % 2 == 0;  // ABAB, then BABA
        std::string cpu = cpus;
        if (cpus == "auto") cpu = std::to_string(idlest_cpu());
        pin = cpus == "none" ? "" : "taskset -c " + cpu + " ";
        std::pair<double, double> bare, variant;
        if (bare_first) {
          bare = run_variant(peer);
          variant = run_variant(v);
        } else {
          variant = run_variant(v);
          bare = run_variant(peer);
        }
        const double bare_ms = bare.first, variant_ms = variant.first;
        variants[peer].ms.push_back(bare_ms);
        variants[v].ms.push_back(variant_ms);
        variants[v].ratio.push_back(variant_ms / bare_ms);
        if (peer == 0 && !variants[v].hooks.empty()) {  // against a peer that saves: no meaning
          variants[v].ms_ex_saves.push_back(variant.second);
          variants[v].ratio_ex_saves.push_back(variant.second / bare_ms);
        }
        std::printf(" %s %.3f%s", variants[v].name.c_str(), variant_ms / bare_ms,
                    cpus == "auto" ? (" (cpu " + cpu + ")").c_str() : "");
        std::fflush(stdout);
      }
      std::printf("\n");
    }
    std::printf("%-40s %-30s %s\n", "", "ms/iteration median (min-max)",
                "ratio to its paired peer (the bare loop unless it says), median (min-max)");
    bool saves = false;
    for (const Variant& v : variants) {
      if (v.ms.empty()) continue;
      std::printf("%-40s ", v.name.c_str());
      print_spread(v.ms, "%.4f (%.4f-%.4f)");
      if (!v.ratio.empty()) print_spread(v.ratio, "        %.3f (%.3f-%.3f)");
      std::printf("\n");
      saves = saves || (!v.ms_ex_saves.empty() && v.ms_ex_saves != v.ms);
    }
    if (saves) {
      std::printf("without the time the loop spent in checkpoint saves (their logged times):\n");
      for (const Variant& v : variants) {
        if (v.ms_ex_saves.empty() || v.ms_ex_saves == v.ms) continue;
        std::printf("%-40s ", (v.name + ", saves excluded").c_str());
        print_spread(v.ms_ex_saves, "%.4f (%.4f-%.4f)");
        print_spread(v.ratio_ex_saves, "        %.3f (%.3f-%.3f)");
        std::printf("\n");
      }
    }
    bool hooks = false;
    for (const Variant& v : variants) hooks = hooks || !v.hook_us.empty();
    if (hooks) {
      std::printf(
          "time in the hooks during the train loop, us/iteration (runner-host's `hooks:` "
          "line), median (min-max), and the last run's split:\n");
      for (const Variant& v : variants) {
        if (v.hook_us.empty()) continue;
        std::printf("%-40s ", v.name.c_str());
        print_spread(v.hook_us, "%.2f (%.2f-%.2f)");
        std::printf("   %s\n", v.hook_split.c_str());
      }
    }
    std::printf("load average after: %s\n", load_average().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench failed: %s\n", e.what());
    return 1;
  }
  return 0;
}

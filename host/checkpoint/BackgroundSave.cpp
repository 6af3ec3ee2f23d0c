#include "checkpoint/BackgroundSave.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>

#include "abi/HostError.hpp"
#include "checkpoint/CheckpointMeta.hpp"
#include "checkpoint/CheckpointStore.hpp"

namespace fs = std::filesystem;

namespace rh::checkpoint {
namespace {

std::string shards_report(int rank) { return "shards.rank" + std::to_string(rank); }
std::string failure_report(int rank) { return "failed.rank" + std::to_string(rank); }

}  // namespace

BackgroundSave::BackgroundSave(CheckpointStore& store, BackgroundSaveJob job)
    : store_(store), job_(std::move(job)), thread_([this] { run(); }) {}

BackgroundSave::~BackgroundSave() {
  cancelled_.store(true);
  if (thread_.joinable()) thread_.join();
}

std::pair<rh_ErrorCode, std::string> BackgroundSave::wait() {
  if (thread_.joinable()) thread_.join();
  return {code_, problem_};
}

void BackgroundSave::report(const std::string& file, const std::string& content) const {
  // Written aside and renamed: rank 0 never reads half a report.
  const fs::path part = job_.tmp / ("." + file + ".part");
  {
    std::ofstream out(part, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) throw host::HostError(RH_ERROR_IO, "cannot write " + part.string());
  }
  std::error_code ec;
  fs::rename(part, job_.tmp / file, ec);
  if (ec)
    throw host::HostError(RH_ERROR_IO, "cannot rename " + part.string() + ": " + ec.message());
}

void BackgroundSave::run() {
  const auto t0 = std::chrono::steady_clock::now();
  auto fail = [this](rh_ErrorCode code, const std::string& what) {
    if (code_ != RH_ERROR_OK) return;  // the first error is the one to report
    code_ = code;
    problem_ = what;
  };
  auto attempt = [&](const auto& step) {
    try {
      step();
    } catch (const host::HostError& e) {
      fail(e.code(), e.what());
    } catch (const std::exception& e) {
      fail(RH_ERROR_IO, e.what());
    }
  };
  // 1. The files, durable. Always waited for: the plugin reads the snapshot
  // until Flush returns.
  attempt([&] { store_.flush(job_.tmp); });
  // 2. The checksums: those the plugin computed while writing, or over the
  // snapshot it wrote.
  if (code_ == RH_ERROR_OK) {
    attempt([&] {
      std::map<std::string, const rh_StateDict*> dicts;
      for (const auto& [stem, dict] : job_.files) dicts[stem] = dict.get();
      fill_checksums(job_.records, dicts);
    });
  }
  if (code_ == RH_ERROR_OK) {
    attempt([&] {
      if (job_.rank == 0)
        publish_on_rank0();  // 4.
      else if (!job_.files.empty())
        report(shards_report(job_.rank), encode_records(job_.records));  // 3.
    });
  }
  if (code_ != RH_ERROR_OK) {
    if (job_.rank == 0) {
      store_.abandon(job_.tmp);
    } else if (!job_.files.empty()) {
      try {  // rank 0 stops waiting; when the directory is gone, it already did
        report(failure_report(job_.rank), problem_);
      } catch (const std::exception&) {
      }
    }
  }
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  finished_.store(true, std::memory_order_release);
}

void BackgroundSave::publish_on_rank0() {
  std::vector<ShardRecord> every = job_.records;
  // 4. Every writing rank's report, in rank order.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(job_.timeout_s);
  for (const int r : job_.reporters) {
    const fs::path shards = job_.tmp / shards_report(r);
    const fs::path failed = job_.tmp / failure_report(r);
    for (;;) {
      if (fs::exists(shards)) break;
      if (fs::exists(failed))
        throw host::HostError(RH_ERROR_IO, "rank " + std::to_string(r) +
                                               " could not write its files of checkpoint '" +
                                               job_.name + "': " + read_whole(failed));
      if (cancelled_.load())
        throw host::HostError(RH_ERROR_CANCELLED, "checkpoint '" + job_.name +
                                                      "' abandoned: the run stopped before rank " +
                                                      std::to_string(r) + " reported its files");
      if (std::chrono::steady_clock::now() > deadline)
        throw host::HostError(RH_ERROR_TIMEOUT,
                              "checkpoint '" + job_.name + "': rank " + std::to_string(r) +
                                  " did not report its files within dist.timeout_s = " +
                                  std::to_string(static_cast<int64_t>(job_.timeout_s)) + " s (no " +
                                  shards.string() + ")");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (auto& rec : decode_records(read_whole(shards))) every.push_back(std::move(rec));
    std::error_code ec;
    fs::remove(shards, ec);  // not part of the checkpoint
  }
  for (const ShardRecord& r : every)
    tensor_bytes_ += static_cast<double>(r.shard.numel) * static_cast<double>(dtype_size(r.dtype));
  CheckpointMeta meta = job_.meta;
  try {
    meta.tensors = merge_records(every);
  } catch (const std::invalid_argument& e) {
    throw host::HostError(RH_ERROR_INTERNAL,
                          "checkpoint '" + job_.name + "': the shards do not add up: " + e.what());
  }
  store_.publish(job_.name, job_.tmp, meta_json(meta));
}

}  // namespace rh::checkpoint

// A checkpoint written and published on a background thread, for a
// checkpoint-IO component with SavesInBackground (docs/architecture.md §6).
//
// The loop thread has taken the snapshot (CPU copies the host owns), handed
// every file to the plugin's Save (which only queued it) and goes on
// training. This thread, on every rank:
//   1. computes the checksums of this rank's shards over the snapshot (while
//      the plugin writes the same bytes; nothing changes them);
//   2. waits until the plugin's files are durable (Flush);
//   3. rank > 0 that wrote files: reports to rank 0 through a file of the
//      temporary directory, `shards.rank<r>` (its shards) or
//      `failed.rank<r>` (why not) — the collectives belong to the loop
//      thread, so the ranks meet through the directory they all write into;
//   4. rank 0: waits for every writing rank's report (up to timeout_s),
//      merges the tensor table, writes meta.json and publishes
//      (CheckpointStore::publish: rename, `latest`). Any failure removes the
//      temporary directory; the published checkpoints are left as they were.
// The loop learns the outcome at an iteration boundary (RunCheckpoints).
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "abi/StateDict.hpp"
#include "checkpoint/CheckpointIndex.hpp"
#include "checkpoint/CheckpointMeta.hpp"
#include "rh/rh_abi.h"

namespace rh::checkpoint {

class CheckpointStore;

struct BackgroundSaveJob {
  std::string name;           // the checkpoint
  std::filesystem::path tmp;  // its temporary directory (rank 0 made it)
  int rank = 0;
  std::vector<int> reporters;  // rank 0: the other ranks that write files
  // The snapshot: each file's stem and dict, owned here until the thread
  // ends (the plugin reads them until Flush returns).
  std::vector<std::pair<std::string, std::unique_ptr<rh_StateDict>>> files;
  // This rank's shards; the thread fills in their crc32.
  std::vector<ShardRecord> records;
  // Rank 0: meta.json but its tensor table, which the thread merges from
  // every rank's shards.
  CheckpointMeta meta;
  double timeout_s = 300;  // rank 0's wait for the others' reports
};

class BackgroundSave {
 public:
  // Starts the thread. `store` must outlive this object.
  BackgroundSave(CheckpointStore& store, BackgroundSaveJob job);
  // Stops waiting for other ranks (a failed run), then joins: the plugin's
  // queued writes finish and an unpublished directory is removed.
  ~BackgroundSave();
  BackgroundSave(const BackgroundSave&) = delete;
  BackgroundSave& operator=(const BackgroundSave&) = delete;

  const std::string& name() const { return job_.name; }
  // Non-blocking: this rank's part is over (rank 0: published or failed).
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Joins. RH_ERROR_OK when this rank's part succeeded, else the error.
  std::pair<rh_ErrorCode, std::string> wait();
  // Rank 0, after wait(): every rank's tensor bytes, and the seconds from
  // the start of the thread to the publish.
  double tensor_bytes() const { return tensor_bytes_; }
  double seconds() const { return seconds_; }

 private:
  void run();
  void publish_on_rank0();
  void report(const std::string& file, const std::string& content) const;

  CheckpointStore& store_;
  BackgroundSaveJob job_;
  rh_ErrorCode code_ = RH_ERROR_OK;
  std::string problem_;
  double tensor_bytes_ = 0;
  double seconds_ = 0;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: starts once the rest is ready
};

}  // namespace rh::checkpoint

// Pieces shared by the communicator backends (host/comm only): dtype checks,
// error messages, a Work completed by a promise. No LibTorch headers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "abi/HostError.hpp"
#include "comm/Communicator.hpp"

namespace rh::comm::detail {

// DLPack >= 0.8's kDLBool (LibTorch 2.x exports torch.bool with it; 1.13 cannot
// export bool tensors at all).
constexpr uint8_t kDLBoolCode = 6;

// "float32", "bfloat16", ...; "dtype(code=..., bits=..., lanes=...)" otherwise.
std::string dtype_name(DLDataType t);
// "cpu", "cuda:1", ...
std::string device_name(DLDevice d);
const char* op_name(ReduceOp op);
// "0, 1, 3"
std::string rank_list(const std::vector<int>& ranks);
// Integer or bool: no Avg.
bool is_integer(DLDataType t);
bool is_bool(DLDataType t);
// Bytes per element; throws HostError(INVALID_ARGUMENT) naming `what` for an
// unsupported dtype.
size_t element_size(DLDataType t, const char* what);
bool same_dtype(DLDataType a, DLDataType b);

// Who and where, for error messages: the global rank of this process and,
// for a subgroup, the global ranks of the group.
struct Identity {
  int global_rank = 0;
  std::vector<int> group_ranks;  // empty for the world
  // "all_reduce" or "all_reduce on group [0, 2]".
  std::string describe(const char* collective) const;
  // "rank 1" or "rank 1 (rank 0 of group [0, 2])".
  std::string where() const;
};

// Builds the error of a failed collective from what the backend reported.
// `timed_out` selects RH_ERROR_TIMEOUT ("<collective> timed out after <t> s
// <step> on rank <r>: <detail> (a peer rank may have died or is stuck)"), else
// RH_ERROR_IO ("<collective> failed <step> on rank <r>: <detail> (a peer
// rank may have died)").
host::HostError collective_error(const Identity& who, const char* collective, bool timed_out,
                                 double timeout_s, const std::string& step,
                                 const std::string& detail);
// The error of a collective that was not run because an earlier one failed.
host::HostError cancelled_error(const Identity& who, const char* collective,
                                const std::string& step, const std::string& first_failure);
// "2", "0.5", "300" (seconds, compact).
std::string format_seconds(double s);
// A store value from text and back.
std::vector<uint8_t> bytes_of(const std::string& s);
std::string text_of(const std::vector<uint8_t>& b);
// An exception's message, without c10's backtrace.
std::string what_of(const std::exception& e);
// This machine's host name, as the messages and the store's records give
// it; "?" when it has none.
std::string this_host();
// Validates the list of Communicator::new_group: non-empty, strictly
// ascending, every rank in [0, size). Throws HostError(INVALID_ARGUMENT).
void check_group_ranks(const std::vector<int>& ranks, int size);

// A Work completed by whoever runs the collective.
class PromiseWork final : public Work {
 public:
  void wait() override;
  bool completed() override;
  void set_done(std::exception_ptr error);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// A work that finished already (nothing to exchange).
std::shared_ptr<Work> done_work();

}  // namespace rh::comm::detail

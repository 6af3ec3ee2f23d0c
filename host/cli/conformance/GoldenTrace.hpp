// The golden lifecycle event sequences (tests/host/lifecycle/golden, which
// the host's own lifecycle tests hold it to) and how a trace is compared
// with them.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace rh::cli::conformance {

// Where they are installed beside the program: <prefix>/share/runner-host/
// conformance/ for <prefix>/bin/runner-host (the build tree has the same
// layout), so an author with only an installed runner-host has them.
std::filesystem::path golden_dir(const std::filesystem::path& program);

// The trace hook's lines with only what the lifecycle fixes: the event name
// and its counters mode, epoch, iter, inner_iter. Metric names differ by
// strategy (ddp/buckets, ...) and metric values by numerics; checkpoint
// paths by directory.
std::string normalise_trace(const std::string& trace);

// Every rank runs the hooks, and the ranks' trace hooks append to one file
// line by line (`append: true, flush_lines: 1`: one write(2) per line, which
// O_APPEND keeps whole), so the file interleaves `ranks` sequences. Each
// golden line is distinct (its counters or event differ), so the file holds
// `ranks` copies of the golden sequence exactly when every golden line
// appears `ranks` times, no other line appears, and for every k the k-th
// occurrences of consecutive golden lines are in golden order (then "the
// k-th occurrence of every line is rank k's" is a valid reading, and if any
// reading is, that one is). nullopt when so, else the first thing that is
// not: a line recorded a wrong number of times, an unexpected line, or two
// events out of order.
std::optional<std::string> interleaving_difference(const std::string& golden,
                                                   const std::string& actual, int ranks);

}  // namespace rh::cli::conformance

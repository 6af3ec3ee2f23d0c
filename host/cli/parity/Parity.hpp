// `runner-host parity --config job.yaml --a A.yaml --b B.yaml [--steps N]
// [--ranks R] [--tolerance REL] [--keep DIR]`: the same job under two
// strategies, step by step, for the reports users open when two strategies
// disagree ("FSDP and DeepSpeed need different learning rates for the same
// loss"). Both runs build the same initial weights (the job's seed; the host
// builds the model the same way whatever the strategy) and read the data in
// the same order (the same job, seed and ranks); each saves a checkpoint
// after every step and writes its metrics. The table: per step each side's
// loss, grad norm (with clip_grad) and loss scale (AmpOptimWrapper), and
// the largest relative difference between the two sides' parameters, with
// the first step and tensor where it passes the tolerance; above it, each
// side's parameter and master dtypes as its checkpoint stores them, and its
// strategy's own precision settings as the host logs them (fsdp's
// mixed_precision param and reduce dtypes, zero's bf16/fp16).
// Exit 0: no step differs beyond the tolerance; 1: one does; 2: bad usage
// or a run that failed.
#pragma once

#include <string>
#include <vector>

namespace rh::cli::parity {

int run_parity(const std::vector<std::string>& args);

}  // namespace rh::cli::parity

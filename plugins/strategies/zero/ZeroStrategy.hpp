// Strategy `zero`: ZeRO stages 1, 2 and 3 (Rajbhandari et al., as DeepSpeed
// implements them), configured with DeepSpeed's keys (ZeroConfig.hpp).
//
// The layout. The trainable parameters are cut into *groups* (at most
// reduce_bucket_size elements each; at stage 3 a group never spans two
// units). A group is one flat vector, zero-padded to a multiple of the world
// size N and split into N equal chunks: rank r owns chunk r of every group.
// Per group and rank:
//   master  [chunk] float32  this rank's part of the parameters' values: the
//                            optimizer updates it (the fp32 master partition)
//   grad    [chunk] float32  this rank's part of the averaged gradient: what
//                            the optimizer reads
// The optimizer gets, per parameter, the piece of it that lies in this
// rank's chunk (a view into master and grad) under the parameter's own name,
// so paramwise_cfg works and checkpoints name their state naturally
// (rh_OptimParam.full_shape / full_offset say where the piece lies).
//
// One step:
//   backward       each gradient, when ready, is copied (/ N) into its
//                  group's flat float32 buffer and released; a group whose
//                  gradients are all in is reduce-scattered at once
//                  (asynchronously, in group order: every rank issues the
//                  same collectives in the same order) into `grad`, and its
//                  flat buffer is freed after. Stage 1 reduces only on the
//                  backward that ends an accumulation window (the full
//                  gradients accumulate in the parameters until then);
//                  stages 2 and 3 reduce every micro-batch and accumulate
//                  into `grad` (DeepSpeed's rule): no full gradient outlives
//                  its group's reduction.
//                  Group buffers come from a pool (reused from step to
//                  step); overlap_comm keeps one reduce-scatter in flight
//                  while the next group fills (off: each one finishes at
//                  once); reduce_scatter: false all-reduces the buffer and
//                  takes this rank's chunk (DeepSpeed's other path).
//   SyncGradients  reduce-scatters the groups not reduced yet (gradients
//                  that never arrived count as zeros) and waits for all.
//   ShouldStep     fp16: unscales and checks for inf/nan on every rank; an
//                  overflow anywhere skips the step everywhere and updates
//                  the loss scaler (DeepSpeed's rules, LossScaler.hpp).
//                  gradient_clipping: clips by the global norm.
//   the host's optimizer steps every rank's masters.
//   AfterOptimizerStep  stages 1 and 2: all-gathers every group's masters
//                  (in allgather_bucket_size pieces) into the parameters.
//                  Stage 3: only the persistent groups (below).
//
// Stage 3 frees the parameters' memory (Model_FreeParamStorage: the storage
// is resized to 0; the tensor and what autograd saved of it stay) and
// gathers a unit's groups before its forward and again before its backward
// (unit callbacks), the next units prefetched while their elements fit in
// stage3_prefetch_bucket_size (and the gathered total in
// stage3_max_live_parameters); it frees them after the unit's forward and
// after its backward. Parameters of at most
// stage3_param_persistence_threshold elements, and tied ones (gpt's
// tie_weights), stay whole on every rank (*persistent* groups, updated
// after each step like stage 1 and 2).
//
// Sizes not written in the job are sized from the model's units (Wrap,
// resolve_sizes): groups and all-gather pieces of one unit (the largest
// unit, or the largest parameter if bigger; an eighth of the model when it
// declares no units), a prefetch of one unit. DeepSpeed's own defaults
// (5e8, 5e8, 5e7 elements) were chosen for 10^9 parameters: on a smaller
// model they put the whole gradient in one flat buffer, so stage 2 saved
// nothing over stage 1, and stage 3 gathered every unit at once. A written
// size is honoured; one that cancels a stage's saving is said in the log.
//
// Mixed precision: bf16 / fp16 working parameters (Model_SetParamData at
// Wrap), float32 masters, gradients reduced in float32. fp16 multiplies the
// loss by the scaler's scale (LossScale). LibTorch 1.13 has no fp16 matmul
// on the CPU: fp16 on the CPU is refused there.
//
// Frozen parameters (model.frozen) are in no group: whole everywhere, never
// communicated, never in the optimizer. Buffers are left as they are on
// each rank.
//
// One rank (Comm_Size(world) == 1) communicates nothing, at every stage:
// no collective at all (not even a 1-rank one), no flat gradient buffer,
// no all-gather after the step, no unit callbacks and nothing freed at
// stage 3 (every parameter stays resident), no zero/* metric but the fp16
// loss scale. The layout is the same (groups of one chunk each, the masters
// and gradients the optimizer reads, the checkpoint's shards), so a
// checkpoint moves to and from N ranks as any other. With float32 working
// parameters each parameter *is* its piece of the flat master
// (Model_SetParamData to a view of it at Wrap: the optimizer's in-place
// update is the parameter's update, nothing is copied back), and each
// gradient, when ready, is copied straight into its piece of `grad` (a
// memcpy; added there on later micro-batches of a window: the float32 sums
// autograd would make in the parameter, in the same order) and released.
// With bf16 / fp16 working parameters the gradients are cast into `grad`
// (at stages 2 and 3 as each becomes ready, at stage 1 at the window's end,
// as on N ranks) and the masters cast back into the parameters after the
// step: real work, no communication. The arithmetic is the single
// strategy's (no divide by the world size, no reduction), bit for bit in
// float32.
//
// Test-only environment variables (tests/plugins/strategies/zero):
//   RH_ZERO_TEST_FP16_COMPUTE=float32  fp16's loss scaling, overflow checks
//     and skipped steps with float32 working parameters (the CPU cannot run
//     fp16 here); RH_ZERO_TEST_INJECT_INF=<rank>:<step>[,...] puts an inf
//     into that rank's gradient before the overflow check of optimizer step
//     <step> (0-based).
//
// Metrics of every optimizer step: zero/comm_bytes, zero/comm_ms (time the
// training thread spent issuing and waiting), zero/peak_gathered_numel
// (stage 3: the most parameter elements held whole at once, persistent ones
// included), zero/param_bytes, zero/gather_buffer_bytes, zero/grad_bytes
// (what this rank held at the step's peak), zero/loss_scale (fp16).
//
// Internal to the plugin (not installed). The class is defined over several
// files: ZeroStrategy.cpp (lifecycle, layout, metrics, the vtable),
// ZeroGradients.cpp (reduce-scatters, loss scaling, one rank), ZeroGather.cpp
// (all-gathers, stage 3), ZeroCheckpoint.cpp (UnitParams, StateExport,
// StateImport).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "LossScaler.hpp"
#include "ShardLayouts.hpp"
#include "ShardedBlock.hpp"
#include "ShardingBase.hpp"
#include "ZeroConfig.hpp"
#include "rh/rh_plugin.h"

namespace rh::zero {

using rh::sharding::InFlight;
// The layout: DeepSpeed's flat chunks (ShardLayouts.hpp).
using Layout = rh::sharding::FlatChunks;
// One parameter's place in its group's flat vector.
using Member = Layout::Member;

// A trainable parameter as the layout sees it: at Wrap from the model, in
// estimate_memory from its rh_ParamSize (the same groups either way).
struct ParamSpec {
  size_t param = 0;
  int64_t numel = 0;
  int32_t unit = -1;
  bool tied = false;
};

// A group is a block of the common layer (ShardedBlock.hpp): master and
// grad [chunk] float32; reduce.flat [N * chunk] float32 while this backward
// collects it, reduce.out [chunk] when accumulating into grad; gather, the
// stage 3 all-gather in the working dtype.
struct Group : rh::sharding::ShardState {
  std::vector<Member> members;
  int64_t numel = 0;         // sum of the members' elements
  int64_t chunk = 0;         // ceil(numel / N): each rank's part
  int unit = -1;             // stage 3: the unit whose params it holds; -1: persistent
  bool sharded = false;      // stage 3 unit group: parameters freed between uses
  std::vector<char> filled;  // per member: its gradient is in reduce.flat
  // Stage 1 in bf16 / fp16 between optimizer steps: per member, reduce.flat
  // already holds (float32) the sum of earlier micro-batches' gradients.
  std::vector<char> held;
  int ready = 0;      // members whose gradient arrived this backward
  bool whole = true;  // stage 3: the parameters hold their values
};

class ZeroStrategy : private rh::sharding::ShardingBase {
 public:
  explicit ZeroStrategy(const rh_CreateArgs& args);
  ~ZeroStrategy();
  void traits(rh_StrategyTraits& t) const;
  void setup_env(rh_SetupEnvArgs& args);
  // --estimate-memory (ABI 1.9), ZeroEstimate.cpp.
  void estimate_memory(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out) const;
  void wrap(const rh_WrapArgs& args);
  void optimizer_params(const rh_OptimParamSink& sink);
  void before_backward(bool sync);
  void sync_gradients(bool sync);
  bool should_step();
  double reduce_grad_norm(double norm_type, double local);
  void after_optimizer_step();
  void unit_params(int32_t unit, rh_UnitParamsOp op);
  void state_export(rh_StateDict* dict);
  void state_import(const rh_StateDict* dict);
  void teardown();

  double loss_scale() { return scaler_ ? scaler_->scale() : 1.0; }

 private:
  // ZeroStrategy.cpp: layout, metrics
  // The model's largest unit and the unit-sized default (elements).
  struct UnitSizes {
    int64_t unit = 0;  // the largest unit's trainable elements, 0 without units
    int64_t one = 0;   // what an unwritten size becomes
  };
  // Fills the sizes `z` leaves unwritten from the units (ZeroStrategy.hpp).
  static UnitSizes resolve_sizes(const std::vector<ParamSpec>& trainable,
                                 ZeroOptimizationConfig& z);
  // The groups of `trainable` (registration order) on `world` ranks:
  // members, numel, chunk, unit, sharded; no tensors.
  static std::vector<Group> plan_groups(const std::vector<ParamSpec>& trainable, int stage,
                                        const ZeroOptimizationConfig& z, int64_t world);
  void build_groups(const std::vector<ParamSpec>& trainable);
  void warn_about_written_sizes(const UnitSizes& sizes);
  void share_masters();
  std::string unit_name(size_t u);
  void put_comm_metrics();
  void parse_injections(const std::string& spec);

  // ZeroGradients.cpp: reducing, one rank
  static void on_grad_ready(void* self, size_t index);
  void grad_ready(size_t index);
  void launch(size_t k);
  bool take_grad(Group& g, size_t j);
  void sync_alone(bool sync);
  bool take_local(Group& g, size_t j);
  void finish_reduce(Group& g);
  void allocate_flat_grad(Group& g);
  void all_reduce(at::Tensor& t, rh_ReduceOp op);

  // ZeroGather.cpp: all-gathers, stage 3
  void gather_into_params(Group& g, int64_t piece_elements);
  void scatter_to_params(Group& g, const at::Tensor& flat);
  void start_gather(Group& g);
  void finish_gather(Group& g);
  void free_params(Group& g);
  int64_t persistent_numel() const;
  static rh_Error* on_unit(void* self, int32_t unit, rh_UnitPhase phase);
  void unit_event(int32_t unit, rh_UnitPhase phase);
  void prefetch(int32_t unit, int direction);

  // ZeroCheckpoint.cpp: state dict entries
  void put_longs(rh_StateDict* dict, const char* key, const std::vector<int64_t>& values);
  bool get_longs(const rh_StateDict* dict, const char* key, std::vector<int64_t>& out);

  // master = this rank's chunk of the group's flat values (`value(m)`: the
  // member's flattened float32 values).
  template <class F>
  void master_from(Group& g, F value) {
    Layout::master_from(g.master, g.members, rank_, g.chunk, value);
  }

  ZeroConfig cfg_;
  int stage_ = 1;
  std::unique_ptr<rh::zero::LossScaler> scaler_;
  // One rank with float32 working parameters: the parameters are views of
  // the masters.
  bool alias_ = false;
  std::string precision_keys_;  // the precision_keys trait ("" in float32)
  bool fp16_compute_float_ = false;
  at::ScalarType working_ = at::kFloat;
  std::vector<int32_t> unit_of_;
  std::vector<Group> groups_;
  std::vector<int> group_of_, member_of_;         // parameter -> group, member (-1: frozen)
  std::vector<std::vector<size_t>> unit_groups_;  // stage 3: unit -> its groups
  bool reduce_now_ = false;                       // this backward reduce-scatters
  bool hold_ = false;  // this backward adds into the float32 flat gradients (stage 1, bf16/fp16)
  bool accumulating_ = false;  // grad holds earlier micro-batches of this window
  size_t next_launch_ = 0;
  int64_t steps_ = 0;  // optimizer steps taken or skipped
  std::set<int64_t> injections_;
  int64_t live_ = 0, peak_live_ = 0;  // stage 3: gathered elements of unit groups (+ persistent)
  int64_t all_param_numel_ = 0;       // every parameter, frozen ones too
  int64_t untracked_numel_ = 0;       // stage 3: frozen parameters (always whole)
  // grad_pool_: flat float32 gradient buffers; gather_pool_: flat
  // working-dtype buffers of all-gathers; in_flight_: groups whose
  // reduce-scatter is issued (ShardingBase).
};

}  // namespace rh::zero

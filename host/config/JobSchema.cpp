#include "config/JobSchema.hpp"

namespace rh::config {
namespace {

Schema build_job_schema() {
  using namespace schema;
  const Schema typed = open_map({{"type", string(), true}});

  return map({
      {"work_dir", string(), false, "directory for logs and checkpoints"},
      {"seed", integer(0), false, "global random seed"},
      {"diff_rank_seed", boolean(), false, "offset the seed by the rank"},
      {"deterministic", boolean(), false, "use deterministic algorithms"},
      {"log_level", enumeration({"trace", "debug", "info", "warn", "error"})},
      {"model", typed, true, "the model builder's config"},
      {"data", map({{"train", open_map({})}, {"val", open_map({})}, {"test", open_map({})}})},
      {"optim_wrapper", map({
                            {"optimizer", typed},
                            {"paramwise_cfg", open_map({})},
                            {"clip_grad", nullable(map({{"max_norm", number_above(0), true},
                                                        {"norm_type", number()}}))},
                            {"accumulative_counts", integer(1)},
                        })},
      {"param_scheduler", one_of({typed, list(typed)}, "a scheduler map or a list of them")},
      {"auto_scale_lr", map({{"enable", boolean()}, {"base_batch_size", integer(1)}})},
      {"train_cfg", map({
                        {"by_epoch", boolean()},
                        {"max_epochs", integer(1)},
                        {"max_iters", integer(1)},
                        {"val_interval", integer(1)},
                        {"val_begin", integer(1)},
                    })},
      {"val_cfg", nullable(map({{"type", string()}}))},
      {"test_cfg", nullable(map({{"type", string()}}))},
      {"strategy", plugin_spec(false), false, "the training strategy plugin"},
      {"hooks", list(plugin_spec(true)), false, "hook plugins"},
      {"checkpoint_io", plugin_spec(false), false, "the checkpoint storage plugin"},
      {"load_from", nullable(string()), false, "checkpoint to load weights from"},
      {"resume", one_of({boolean(), string()}, "true, false, 'auto' or a checkpoint path")},
      {"dist", map({
                   {"backend", enumeration({"auto", "gloo", "nccl"})},
                   {"timeout_s", number_above(0)},
                   {"master_addr", string()},
                   {"master_port", integer(0, 65535)},
               })},
  });
}

}  // namespace

const Schema& job_schema() {
  static const Schema kSchema = build_job_schema();
  return kSchema;
}

}  // namespace rh::config

#include "lifecycle/ModelAccess.hpp"

#include <ATen/DLConvertor.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <array>

#include "abi/HostError.hpp"
#include "model/Model.hpp"
#include "rh/cpp/torch.hpp"

// Behind the opaque rh_Model: the model, its parameter list, and the DLPack
// views handed out (freed with the model access).
struct rh_Model {
  // A DLPack view of one parameter or buffer, kept for as long as the tensor
  // it shows is what the parameter holds: Model_GetParam / Model_GetBuffer
  // run every step (ddp's broadcast_buffers), so a new view per call would
  // grow for the whole run.
  struct CachedView {
    DLManagedTensor* view = nullptr;  // owned
    // What the view was made from. A view is a fixed alias (data pointer,
    // shape, strides): when the tensor's storage is replaced (set_data, as a
    // sharding strategy's Model_SetParamData does) it would still show the old
    // memory, so any change of these makes a new view.
    const void* data = nullptr;
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;
    at::ScalarType dtype = at::kFloat;
    at::Device device = at::kCPU;

    bool shows(const at::Tensor& t) const {
      return view != nullptr && data == t.data_ptr() && dtype == t.scalar_type() &&
             device == t.device() && t.sizes().equals(sizes) && t.strides().equals(strides);
    }
  };

  rh_Model() = default;
  rh_Model(const rh_Model&) = delete;  // owns the views
  rh_Model& operator=(const rh_Model&) = delete;

  rh::model::Model* model = nullptr;
  std::vector<rh::model::NamedTensor> params;
  std::vector<rh::model::NamedTensor> buffers;
  std::vector<rh::model::Unit> units;
  std::vector<int32_t> unit_of_param;
  std::vector<std::string> module_paths;
  std::vector<CachedView> param_views;
  std::vector<CachedView> buffer_views;
  // Views replaced because their tensor's storage changed outside
  // Model_SetParamData: the ABI lets the strategy keep using a borrowed view
  // until the end of the run, so they are freed only then (training updates
  // tensors in place and never adds to this). Model_SetParamData, once
  // implemented, ends the borrow: it must free the parameter's view, not
  // retire it, or the replaced (full) tensor's memory stays alive.
  std::vector<DLManagedTensor*> retired_views;  // owned
  // One view per parameter's gradient, replaced when the gradient tensor
  // changes (zero_grad sets gradients to none): no growth per iteration.
  std::vector<DLManagedTensor*> grad_views;
  std::vector<const void*> grad_view_of;
  // Gradient accumulators with our post hooks: kept alive for the whole run
  // (autograd holds them only weakly between backwards).
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  // Parameters with a grad-ready callback (their dtype and device are then
  // fixed: set_data to another dtype would orphan the accumulator).
  std::vector<char> has_grad_callback;
  std::vector<char> tied;
  // Bytes of each parameter's storage while freed (Model_FreeParamStorage);
  // 0 when it holds its memory.
  std::vector<size_t> freed_bytes;

  // Unit callbacks (Model_AddUnitCallback), by unit and phase.
  struct UnitCallback {
    rh_UnitFn fn;
    void* user;
  };
  std::vector<std::array<std::vector<UnitCallback>, 4>> unit_callbacks;
  bool any_post_backward = false;
  bool post_backward_hooks_added = false;
  std::vector<int> params_pending;  // per unit: trainable parameters without their gradient yet
  std::vector<char> post_backward_done;
  std::vector<int> trainable_in_unit;

  // (Re)installs the model's unit callback once a plugin has asked for a
  // unit phase: without one the model's forward does no per-unit work, and
  // its outputs get the PreBackward hook only when a PRE_BACKWARD callback
  // exists (see model::Model::set_unit_callback).
  void install_unit_callback() {
    bool pre_backward = false;
    for (const auto& phases : unit_callbacks)
      pre_backward = pre_backward || !phases[RH_UNIT_PRE_BACKWARD].empty();
    model->set_unit_callback(
        [this](int unit, rh::model::UnitPhase phase) {
          const rh_UnitPhase p = phase == rh::model::UnitPhase::PreForward ? RH_UNIT_PRE_FORWARD
                                 : phase == rh::model::UnitPhase::PostForward
                                     ? RH_UNIT_POST_FORWARD
                                     : RH_UNIT_PRE_BACKWARD;
          fire_unit(unit, p);
        },
        pre_backward);
  }
  void fire_unit(int32_t unit, rh_UnitPhase phase) {
    for (const UnitCallback& cb : unit_callbacks[unit][phase])
      rh::host::throw_if_error(cb.fn(cb.user, unit, phase),
                               "unit callback of '" + units[unit].name + "'");
  }
  void post_backward(int32_t unit) {
    if (post_backward_done[unit]) return;
    post_backward_done[unit] = 1;
    fire_unit(unit, RH_UNIT_POST_BACKWARD);
  }

  DLManagedTensor* view(CachedView& cached, const at::Tensor& t) {
    if (cached.shows(t)) return cached.view;
    if (cached.view != nullptr) retired_views.push_back(cached.view);
    cached.view = at::toDLPack(t.detach());
    cached.data = t.data_ptr();
    cached.sizes = t.sizes().vec();
    cached.strides = t.strides().vec();
    cached.dtype = t.scalar_type();
    cached.device = t.device();
    return cached.view;
  }

  size_t held_views() const {
    size_t n = retired_views.size();
    for (const auto* list : {&param_views, &buffer_views})
      for (const CachedView& c : *list) n += c.view != nullptr ? 1 : 0;
    for (DLManagedTensor* v : grad_views) n += v != nullptr ? 1 : 0;
    return n;
  }

  // Frees a parameter's cached view (the borrow ended: Model_SetParamData,
  // Model_FreeParamStorage).
  void drop_view(size_t i) {
    if (param_views[i].view != nullptr) param_views[i].view->deleter(param_views[i].view);
    param_views[i] = CachedView{};
  }
  void drop_grad_view(size_t i) {
    if (grad_views[i] != nullptr) grad_views[i]->deleter(grad_views[i]);
    grad_views[i] = nullptr;
    grad_view_of[i] = nullptr;
  }

  ~rh_Model() {
    for (const auto* list : {&param_views, &buffer_views})
      for (const CachedView& c : *list)
        if (c.view != nullptr) c.view->deleter(c.view);
    for (DLManagedTensor* v : retired_views) v->deleter(v);
    for (DLManagedTensor* v : grad_views)
      if (v != nullptr) v->deleter(v);
  }
};

namespace rh::lifecycle {
namespace {

rh_StringView sv(const std::string& s) { return {s.data(), s.size()}; }

size_t Model_NumParams(const rh_Model* m) { return m->params.size(); }
size_t Model_NumBuffers(const rh_Model* m) { return m->buffers.size(); }
size_t Model_NumUnits(const rh_Model* m) { return m->units.size(); }
rh_StringView Model_UnitName(const rh_Model* m, int32_t unit) {
  if (unit < 0 || static_cast<size_t>(unit) >= m->units.size()) return {"", 0};
  return sv(m->units[unit].name);
}

rh_Error* fill(rh_Model* m, rh_Model::CachedView& cached, const rh::model::NamedTensor& t,
               const std::string& module_path, int32_t unit, bool requires_grad,
               rh_ParamInfo* out) {
  if (out == nullptr || out->struct_size < RH_STRUCT_SIZE(rh_ParamInfo, name))
    return host::new_error(RH_ERROR_INVALID_ARGUMENT, "rh_ParamInfo: struct_size is not set");
  rh_ParamInfo info{};
  info.struct_size = out->struct_size;
  info.name = sv(t.name);
  info.module_path = sv(module_path);
  info.requires_grad = requires_grad ? 1 : 0;
  info.unit = unit;
  info.data = m->view(cached, t.tensor);
  info.tied = 0;
  std::memcpy(out, &info, std::min(out->struct_size, sizeof info));
  return nullptr;
}

rh_Error* Model_GetParam(rh_Model* m, size_t i, rh_ParamInfo* out) {
  return host::guard_entry("Model_GetParam", [&]() -> rh_Error* {
    if (i >= m->params.size())
      return host::new_error(RH_ERROR_INVALID_ARGUMENT, "Model_GetParam: index out of range");
    rh_Error* err = fill(m, m->param_views[i], m->params[i], m->module_paths[i],
                         m->unit_of_param[i], m->params[i].tensor.requires_grad(), out);
    if (err == nullptr && RH_STRUCT_HAS(out, rh_ParamInfo, tied)) out->tied = m->tied[i];
    return err;
  });
}

rh_Error* Model_GetBuffer(rh_Model* m, size_t i, rh_ParamInfo* out) {
  return host::guard_entry("Model_GetBuffer", [&]() -> rh_Error* {
    if (i >= m->buffers.size())
      return host::new_error(RH_ERROR_INVALID_ARGUMENT, "Model_GetBuffer: index out of range");
    const std::string& name = m->buffers[i].name;
    return fill(m, m->buffer_views[i], m->buffers[i],
                name.substr(0, name.rfind('.') == std::string::npos ? 0 : name.rfind('.')), 0,
                false, out);
  });
}

rh_Error* Model_GetGrad(rh_Model* m, size_t i, DLManagedTensor** out) {
  return host::guard_entry("Model_GetGrad", [&]() -> rh_Error* {
    if (i >= m->params.size())
      return host::new_error(RH_ERROR_INVALID_ARGUMENT, "Model_GetGrad: index out of range");
    const at::Tensor& grad = m->params[i].tensor.grad();
    if (!grad.defined()) {
      *out = nullptr;
      return nullptr;
    }
    if (m->grad_views[i] == nullptr || m->grad_view_of[i] != grad.unsafeGetTensorImpl()) {
      if (m->grad_views[i] != nullptr) m->grad_views[i]->deleter(m->grad_views[i]);
      m->grad_views[i] = at::toDLPack(grad);
      m->grad_view_of[i] = grad.unsafeGetTensorImpl();
    }
    *out = m->grad_views[i];
    return nullptr;
  });
}

// Runs after a parameter's AccumulateGrad: its .grad is complete for this
// backward (docs/architecture.md §5: keep the accumulator alive).
class GradReadyHook : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(rh_GradReadyFn fn, void* user, size_t index)
      : fn_(fn), user_(user), index_(index) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    fn_(user_, index_);
    return outputs;
  }

 private:
  rh_GradReadyFn fn_;
  void* user_;
  size_t index_;
};

rh_Error* Model_AddGradReadyCallback(rh_Model* m, size_t i, rh_GradReadyFn fn, void* user) {
  return host::guard_entry("Model_AddGradReadyCallback", [&]() -> rh_Error* {
    if (i >= m->params.size() || fn == nullptr)
      return host::new_error(RH_ERROR_INVALID_ARGUMENT,
                             "Model_AddGradReadyCallback: bad index or NULL function");
    const at::Tensor& p = m->params[i].tensor;
    if (!p.requires_grad())
      return host::new_error(RH_ERROR_INVALID_ARGUMENT, "Model_AddGradReadyCallback: parameter '" +
                                                            m->params[i].name +
                                                            "' does not require grad");
    std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(p);
    acc->add_post_hook(std::make_unique<GradReadyHook>(fn, user, i));
    m->accumulators.push_back(std::move(acc));
    m->has_grad_callback[i] = 1;
    return nullptr;
  });
}

// The host's own post hook on every trainable parameter: counts a unit's
// parameters down to its POST_BACKWARD.
void count_down(void* user, size_t i) {
  auto* m = static_cast<rh_Model*>(user);
  const int32_t unit = m->unit_of_param[i];
  if (unit >= 0 && --m->params_pending[unit] == 0) m->post_backward(unit);
}

rh_Error* Model_AddUnitCallback(rh_Model* m, int32_t unit, rh_UnitPhase phase, rh_UnitFn fn,
                                void* user) {
  return host::guard_entry("Model_AddUnitCallback", [&]() -> rh_Error* {
    if (unit < 0 || static_cast<size_t>(unit) >= m->units.size() || fn == nullptr ||
        phase < RH_UNIT_PRE_FORWARD || phase > RH_UNIT_POST_BACKWARD)
      return host::new_error(RH_ERROR_INVALID_ARGUMENT,
                             "Model_AddUnitCallback: bad unit (" + std::to_string(unit) + " of " +
                                 std::to_string(m->units.size()) + "), phase or NULL function");
    m->unit_callbacks[unit][phase].push_back({fn, user});
    if (phase == RH_UNIT_POST_BACKWARD) m->any_post_backward = true;
    // POST_BACKWARD comes from the gradient accumulators' hooks, not from
    // the model's forward.
    if (phase != RH_UNIT_POST_BACKWARD) m->install_unit_callback();
    return nullptr;
  });
}

rh_Error* Model_SetParamData(rh_Model* m, size_t i, DLManagedTensor* data) {
  return host::guard_entry("Model_SetParamData", [&]() -> rh_Error* {
    if (i >= m->params.size() || data == nullptr)
      return host::new_error(RH_ERROR_INVALID_ARGUMENT,
                             "Model_SetParamData: bad index or NULL data");
    at::Tensor& p = m->params[i].tensor;
    const std::string& name = m->params[i].name;
    const at::Tensor view = rh::borrow_tensor(data);  // for the checks; does not own
    if (view.sizes() != p.sizes())
      return host::new_error(RH_ERROR_INVALID_ARGUMENT,
                             "Model_SetParamData: '" + name + "' has shape " + c10::str(p.sizes()) +
                                 ", the new data " + c10::str(view.sizes()) +
                                 " (the shape must stay: autograd recorded it; free the "
                                 "storage to hold only a shard)");
    if (m->has_grad_callback[i] &&
        (view.scalar_type() != p.scalar_type() || view.device() != p.device()))
      return host::new_error(RH_ERROR_FAILED_PRECONDITION,
                             "Model_SetParamData: '" + name +
                                 "' already has a grad-ready callback; change its dtype or "
                                 "device before registering callbacks");
    if (m->freed_bytes[i] != 0)
      return host::new_error(RH_ERROR_FAILED_PRECONDITION,
                             "Model_SetParamData: '" + name + "' has its storage freed");
    torch::NoGradGuard no_grad;
    p.set_data(at::fromDLPack(data));  // owns `data` from here on
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
    m->drop_view(i);
    m->drop_grad_view(i);
    return nullptr;
  });
}

rh_Error* Model_ReleaseGrad(rh_Model* m, size_t i) {
  return host::guard_entry("Model_ReleaseGrad", [&]() -> rh_Error* {
    if (i >= m->params.size())
      return host::new_error(RH_ERROR_INVALID_ARGUMENT, "Model_ReleaseGrad: index out of range");
    m->drop_grad_view(i);
    if (m->params[i].tensor.grad().defined()) m->params[i].tensor.mutable_grad() = at::Tensor();
    return nullptr;
  });
}

// The storage must hold exactly the parameter (not a view into a larger
// one); what shares it (autograd's saved views) sees it freed and restored.
rh_Error* Model_FreeParamStorage(rh_Model* m, size_t i) {
  return host::guard_entry("Model_FreeParamStorage", [&]() -> rh_Error* {
    if (i >= m->params.size())
      return host::new_error(RH_ERROR_INVALID_ARGUMENT,
                             "Model_FreeParamStorage: index out of range");
    if (m->freed_bytes[i] != 0) return nullptr;
    const at::Tensor& p = m->params[i].tensor;
    c10::StorageImpl* storage = p.storage().unsafeGetStorageImpl();
    const size_t bytes = static_cast<size_t>(p.numel()) * p.element_size();
    if (p.storage_offset() != 0 || storage->nbytes() != bytes || !p.is_contiguous())
      return host::new_error(RH_ERROR_FAILED_PRECONDITION,
                             "Model_FreeParamStorage: '" + m->params[i].name +
                                 "' is a view into a larger storage: freeing it would free "
                                 "other tensors' memory");
    if (bytes == 0) return nullptr;
    m->drop_view(i);
    storage->set_data_ptr_noswap(at::DataPtr(nullptr, p.device()));
    storage->set_nbytes(0);
    m->freed_bytes[i] = bytes;
    return nullptr;
  });
}

rh_Error* Model_RestoreParamStorage(rh_Model* m, size_t i) {
  return host::guard_entry("Model_RestoreParamStorage", [&]() -> rh_Error* {
    if (i >= m->params.size())
      return host::new_error(RH_ERROR_INVALID_ARGUMENT,
                             "Model_RestoreParamStorage: index out of range");
    const size_t bytes = m->freed_bytes[i];
    if (bytes == 0) return nullptr;
    const at::Tensor& p = m->params[i].tensor;
    c10::StorageImpl* storage = p.storage().unsafeGetStorageImpl();
    // A storage made from foreign memory (DLPack: Model_SetParamData) has no
    // allocator of its own: the device's.
    c10::Allocator* allocator = storage->allocator() != nullptr
                                    ? storage->allocator()
                                    : c10::GetAllocator(p.device().type());
    storage->set_data_ptr_noswap(allocator->allocate(bytes));
    storage->set_nbytes(bytes);
    m->freed_bytes[i] = 0;
    return nullptr;
  });
}

rh_Error* Model_SetGrad(rh_Model* m, size_t i, const DLManagedTensor* grad) {
  return host::guard_entry("Model_SetGrad", [&]() -> rh_Error* {
    if (i >= m->params.size() || grad == nullptr)
      return host::new_error(RH_ERROR_INVALID_ARGUMENT,
                             "Model_SetGrad: bad index or NULL gradient");
    at::Tensor& p = m->params[i].tensor;
    at::Tensor src = rh::borrow_tensor(grad);
    if (src.sizes() != p.sizes())
      return host::new_error(
          RH_ERROR_INVALID_ARGUMENT,
          "Model_SetGrad: gradient shape does not match '" + m->params[i].name + "'");
    torch::NoGradGuard no_grad;
    if (p.grad().defined()) {
      p.mutable_grad().copy_(src);
    } else {
      p.mutable_grad() = src.to(p.options()).clone();
    }
    return nullptr;
  });
}

rh_Error* Model_BindGrad(rh_Model* m, size_t i, DLManagedTensor* grad) {
  return host::guard_entry("Model_BindGrad", [&]() -> rh_Error* {
    if (i >= m->params.size() || grad == nullptr)
      return host::new_error(RH_ERROR_INVALID_ARGUMENT,
                             "Model_BindGrad: bad index or NULL gradient");
    at::Tensor& p = m->params[i].tensor;
    const at::Tensor view = rh::borrow_tensor(grad);  // for the checks; does not own
    if (view.sizes() != p.sizes() || view.scalar_type() != p.scalar_type() ||
        view.device() != p.device())
      return host::new_error(RH_ERROR_INVALID_ARGUMENT,
                             "Model_BindGrad: gradient shape, dtype or device does not match '" +
                                 m->params[i].name + "'");
    p.mutable_grad() = at::fromDLPack(grad);  // owns `grad` from here on
    return nullptr;
  });
}

}  // namespace

struct ModelAccess::Impl {
  rh_Model model;
  rh_ModelApi api{};
};

ParamPlacement param_placement(const std::vector<model::NamedTensor>& params,
                               const std::vector<model::Unit>& units) {
  std::map<std::string, int32_t> unit_of;
  for (size_t u = 0; u < units.size(); ++u)
    for (const auto& name : units[u].param_names) unit_of[name] = static_cast<int32_t>(u);
  ParamPlacement out;
  // -1: no unit declares it (the root): reported so (ABI 1.8; 0 before),
  // the host's "root" for checkpoints too; its gradient counts towards no
  // unit's POST_BACKWARD.
  for (const auto& p : params) out.unit.push_back(unit_of.count(p.name) ? unit_of[p.name] : -1);
  out.tied.assign(params.size(), 0);
  for (const auto& u : units)
    for (const auto& name : u.shared_param_names)
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i].name == name) out.tied[i] = 1;
  return out;
}

ModelAccess::ModelAccess(model::Model& model) : impl_(std::make_unique<Impl>()) {
  rh_Model& m = impl_->model;
  m.model = &model;
  m.params = model.named_parameters();
  m.buffers = model.named_buffers();
  m.units = model.units();
  ParamPlacement placement = param_placement(m.params, m.units);
  m.unit_of_param = std::move(placement.unit);
  m.tied = std::move(placement.tied);
  for (const auto& p : m.params)
    m.module_paths.push_back(
        p.name.rfind('.') == std::string::npos ? "" : p.name.substr(0, p.name.rfind('.')));
  m.param_views.resize(m.params.size());
  m.buffer_views.resize(m.buffers.size());
  m.grad_views.assign(m.params.size(), nullptr);
  m.grad_view_of.assign(m.params.size(), nullptr);
  m.has_grad_callback.assign(m.params.size(), 0);
  m.freed_bytes.assign(m.params.size(), 0);
  m.unit_callbacks.resize(m.units.size());
  m.params_pending.assign(m.units.size(), 0);
  m.post_backward_done.assign(m.units.size(), 0);
  m.trainable_in_unit.assign(m.units.size(), 0);
  rh_ModelApi& a = impl_->api;
  a.struct_size = RH_MODEL_API_STRUCT_SIZE;
  a.Model_NumParams = &Model_NumParams;
  a.Model_GetParam = &Model_GetParam;
  a.Model_GetGrad = &Model_GetGrad;
  a.Model_NumBuffers = &Model_NumBuffers;
  a.Model_GetBuffer = &Model_GetBuffer;
  a.Model_NumUnits = &Model_NumUnits;
  a.Model_UnitName = &Model_UnitName;
  a.Model_AddGradReadyCallback = &Model_AddGradReadyCallback;
  a.Model_SetGrad = &Model_SetGrad;
  a.Model_BindGrad = &Model_BindGrad;
  a.Model_SetParamData = &Model_SetParamData;
  a.Model_AddUnitCallback = &Model_AddUnitCallback;
  a.Model_ReleaseGrad = &Model_ReleaseGrad;
  a.Model_FreeParamStorage = &Model_FreeParamStorage;
  a.Model_RestoreParamStorage = &Model_RestoreParamStorage;
}

ModelAccess::~ModelAccess() { impl_->model.model->set_unit_callback(nullptr); }

void ModelAccess::begin_backward() {
  rh_Model& m = impl_->model;
  if (!m.any_post_backward) return;
  if (!m.post_backward_hooks_added) {
    // Added at the first backward, after Wrap: a strategy may have changed
    // a parameter's dtype there (set_data makes a new accumulator).
    m.post_backward_hooks_added = true;
    for (size_t i = 0; i < m.params.size(); ++i) {
      const at::Tensor& p = m.params[i].tensor;
      if (!p.requires_grad()) continue;
      if (m.unit_of_param[i] >= 0) ++m.trainable_in_unit[m.unit_of_param[i]];
      std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(p);
      acc->add_post_hook(std::make_unique<GradReadyHook>(&count_down, &m, i));
      m.accumulators.push_back(std::move(acc));
    }
  }
  m.params_pending = m.trainable_in_unit;
  std::fill(m.post_backward_done.begin(), m.post_backward_done.end(), 0);
}

void ModelAccess::end_backward() {
  rh_Model& m = impl_->model;
  if (!m.any_post_backward) return;
  for (int32_t u = static_cast<int32_t>(m.units.size()) - 1; u >= 0; --u) m.post_backward(u);
}

rh_Model* ModelAccess::handle() { return &impl_->model; }
const rh_ModelApi* ModelAccess::api() const { return &impl_->api; }
size_t ModelAccess::held_views() const { return impl_->model.held_views(); }
void ModelAccess::end_gradient_borrows() {
  for (size_t i = 0; i < impl_->model.grad_views.size(); ++i) impl_->model.drop_grad_view(i);
}

}  // namespace rh::lifecycle

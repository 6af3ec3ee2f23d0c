#include "lifecycle/ModelAccess.hpp"

#include <ATen/DLConvertor.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "model/Model.hpp"
#include "plugins/HostError.hpp"
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
  std::memcpy(out, &info, std::min(out->struct_size, sizeof info));
  return nullptr;
}

rh_Error* Model_GetParam(rh_Model* m, size_t i, rh_ParamInfo* out) {
  return host::guard_entry("Model_GetParam", [&]() -> rh_Error* {
    if (i >= m->params.size())
      return host::new_error(RH_ERROR_INVALID_ARGUMENT, "Model_GetParam: index out of range");
    return fill(m, m->param_views[i], m->params[i], m->module_paths[i], m->unit_of_param[i],
                m->params[i].tensor.requires_grad(), out);
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

ModelAccess::ModelAccess(model::Model& model) : impl_(std::make_unique<Impl>()) {
  rh_Model& m = impl_->model;
  m.model = &model;
  m.params = model.named_parameters();
  m.buffers = model.named_buffers();
  m.units = model.units();
  std::map<std::string, int32_t> unit_of;
  for (size_t u = 0; u < m.units.size(); ++u)
    for (const auto& name : m.units[u].param_names) unit_of[name] = static_cast<int32_t>(u);
  for (const auto& p : m.params) {
    m.unit_of_param.push_back(unit_of.count(p.name) ? unit_of[p.name] : 0);
    m.module_paths.push_back(
        p.name.rfind('.') == std::string::npos ? "" : p.name.substr(0, p.name.rfind('.')));
  }
  m.param_views.resize(m.params.size());
  m.buffer_views.resize(m.buffers.size());
  m.grad_views.assign(m.params.size(), nullptr);
  m.grad_view_of.assign(m.params.size(), nullptr);
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
}

ModelAccess::~ModelAccess() = default;  // rh_Model frees its views

rh_Model* ModelAccess::handle() { return &impl_->model; }
const rh_ModelApi* ModelAccess::api() const { return &impl_->api; }
size_t ModelAccess::held_views() const { return impl_->model.held_views(); }

}  // namespace rh::lifecycle

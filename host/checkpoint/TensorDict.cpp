#include "checkpoint/TensorDict.hpp"

#include <ATen/DLConvertor.h>
#include <torch/torch.h>

#include <map>
#include <sstream>

#include "abi/HostError.hpp"
#include "abi/StateDict.hpp"

namespace rh::checkpoint {
namespace {

std::string shape_str(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

const rh_StateDict::Entry& entry(const rh_StateDict& dict, const std::string& key) {
  auto it = dict.entries.find(key);
  if (it == dict.entries.end())
    throw host::HostError(RH_ERROR_NOT_FOUND, "the checkpoint has no entry '" + key + "'");
  return it->second;
}

}  // namespace

void put_tensor(rh_StateDict& dict, const std::string& key, const at::Tensor& tensor) {
  at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
  DLManagedTensor* dl = at::toDLPack(cpu);
  try {
    dict.entries[key] = host::copy_tensor_entry(*dl, key);
  } catch (...) {
    dl->deleter(dl);
    throw;
  }
  dl->deleter(dl);
}

void put_tensor_view(rh_StateDict& dict, const std::string& key, const at::Tensor& tensor) {
  if (!tensor.device().is_cpu() || !tensor.is_contiguous() || tensor.numel() == 0)
    return put_tensor(dict, key, tensor);
  rh_StateDict::Entry e;
  e.is_tensor = true;
  e.dtype = at::getDLDataType(tensor);
  e.shape = tensor.sizes().vec();
  auto held = std::make_shared<at::Tensor>(tensor.detach());
  e.borrowed = static_cast<const uint8_t*>(held->data_ptr());
  e.borrowed_size = tensor.nbytes();
  e.owner = std::move(held);
  dict.entries[key] = std::move(e);
}

void put_text(rh_StateDict& dict, const std::string& key, const std::string& text) {
  rh_StateDict::Entry e;
  e.bytes.assign(text.begin(), text.end());
  dict.entries[key] = std::move(e);
}

void place_into(rh_StateDict& dict, const std::string& prefix,
                const std::vector<model::NamedTensor>& targets) {
  for (const auto& t : targets) {
    const at::Tensor& x = t.tensor;
    if (!x.defined() || !x.device().is_cpu() || !x.is_contiguous() || x.numel() == 0 ||
        x.is_sparse())
      continue;
    rh_StateDict::Destination d;
    d.data = x.data_ptr();
    d.dtype = at::getDLDataType(x);
    d.shape = x.sizes().vec();
    dict.destinations[prefix + t.name] = std::move(d);
  }
}

bool has(const rh_StateDict& dict, const std::string& key) { return dict.entries.count(key) > 0; }

at::Tensor get_tensor(const rh_StateDict& dict, const std::string& key) {
  const rh_StateDict::Entry& e = entry(dict, key);
  if (!e.is_tensor)
    throw host::HostError(RH_ERROR_DATA_LOSS, "checkpoint entry '" + key + "' is not a tensor");
  auto options = at::TensorOptions().dtype(at::toScalarType(e.dtype));
  return at::from_blob(const_cast<uint8_t*>(e.data()), at::IntArrayRef(e.shape), options);
}

at::Tensor take_tensor(rh_StateDict& dict, const std::string& key) {
  const auto it = dict.entries.find(key);
  if (it == dict.entries.end())
    throw host::HostError(RH_ERROR_NOT_FOUND, "the checkpoint has no entry '" + key + "'");
  rh_StateDict::Entry& e = it->second;
  if (!e.is_tensor)
    throw host::HostError(RH_ERROR_DATA_LOSS, "checkpoint entry '" + key + "' is not a tensor");
  const bool owned = e.borrowed == nullptr || e.owner != nullptr;
  if (!owned) return get_tensor(dict, key).clone();
  // The tensor holds what kept the memory alive; the entry no longer does.
  std::shared_ptr<const void> keep = e.owner;
  if (e.borrowed == nullptr) keep = std::make_shared<std::vector<uint8_t>>(std::move(e.bytes));
  const auto* data = e.borrowed != nullptr
                         ? e.borrowed
                         : static_cast<const std::vector<uint8_t>*>(keep.get())->data();
  auto options = at::TensorOptions().dtype(at::toScalarType(e.dtype));
  at::Tensor t = at::from_blob(
      const_cast<uint8_t*>(data), at::IntArrayRef(e.shape), [keep](void*) mutable { keep.reset(); },
      options);
  dict.entries.erase(it);
  return t;
}

std::string get_text(const rh_StateDict& dict, const std::string& key) {
  const rh_StateDict::Entry& e = entry(dict, key);
  return std::string(reinterpret_cast<const char*>(e.data()), e.size());
}

std::string LoadReport::str() const {
  std::ostringstream out;
  auto list = [&](const char* what, const std::vector<std::string>& items) {
    if (items.empty()) return;
    out << "\n  " << what << " (" << items.size() << "):";
    for (size_t i = 0; i < items.size() && i < 10; ++i)
      out << " " << items[i] << (i + 1 < items.size() ? "," : "");
    if (items.size() > 10) out << " ...";
  };
  list("missing in the checkpoint", missing);
  list("unexpected in the checkpoint", unexpected);
  list("mismatched (shape or dtype)", mismatched);
  return out.str();
}

namespace {

// Whether `rule` loads a `from` tensor into a `to` one.
bool converts(DtypeRule rule, at::ScalarType from, at::ScalarType to) {
  if (rule == DtypeRule::kExact || !at::isFloatingType(from) || !at::isFloatingType(to))
    return false;
  if (rule == DtypeRule::kAny) return true;
  auto rank = [](at::ScalarType t) {  // a wider format holds every value of a narrower one
    return t == at::kDouble ? 3 : t == at::kFloat ? 2 : 1;
  };
  return rank(from) > rank(to);
}

// load_into and check_into: the same checks; `copy` copies what fits.
LoadReport fit_into(const rh_StateDict& dict, const std::string& prefix,
                    const std::vector<model::NamedTensor>& targets, bool copy, DtypeRule rule) {
  LoadReport report;
  std::map<std::string, const model::NamedTensor*> by_name;
  for (const auto& t : targets) by_name[t.name] = &t;
  for (const auto& [key, e] : dict.entries) {
    if (key.rfind(prefix, 0) != 0 || !e.is_tensor) continue;
    std::string name = key.substr(prefix.size());
    if (by_name.count(name) == 0) report.unexpected.push_back(name);
  }
  torch::NoGradGuard no_grad;
  for (const auto& t : targets) {
    std::string key = prefix + t.name;
    if (!has(dict, key)) {
      report.missing.push_back(t.name);
      continue;
    }
    const rh_StateDict::Entry& e = entry(dict, key);
    at::Tensor src;
    try {
      src = get_tensor(dict, key);
    } catch (const c10::Error&) {
      // A dtype LibTorch has no type for (U16, U32, U64 from a safetensors file).
      report.mismatched.push_back(t.name + ": checkpoint dtype DLPack code " +
                                  std::to_string(e.dtype.code) + " bits " +
                                  std::to_string(e.dtype.bits) + " vs model " +
                                  std::string(c10::toString(t.tensor.scalar_type())));
      continue;
    }
    if (src.sizes() != t.tensor.sizes()) {
      report.mismatched.push_back(t.name + ": checkpoint " + shape_str(src.sizes()) + " vs model " +
                                  shape_str(t.tensor.sizes()));
      continue;
    }
    // copy_ would convert silently: a checkpoint of another precision is not
    // the state the model had, so it is reported like a shape difference.
    if (src.scalar_type() != t.tensor.scalar_type()) {
      if (!converts(rule, src.scalar_type(), t.tensor.scalar_type())) {
        report.mismatched.push_back(t.name + ": checkpoint dtype " +
                                    std::string(c10::toString(src.scalar_type())) + " vs model " +
                                    std::string(c10::toString(t.tensor.scalar_type())));
        continue;
      }
      report.converted.push_back(t.name + ": " + std::string(c10::toString(src.scalar_type())) +
                                 " -> " + std::string(c10::toString(t.tensor.scalar_type())));
    }
    // A tensor the checkpoint-IO plugin read in place (a Destination) is
    // there already.
    if (copy && src.data_ptr() != t.tensor.data_ptr()) t.tensor.copy_(src);
  }
  return report;
}

}  // namespace

LoadReport load_into(const rh_StateDict& dict, const std::string& prefix,
                     const std::vector<model::NamedTensor>& targets, DtypeRule rule) {
  return fit_into(dict, prefix, targets, true, rule);
}

LoadReport check_into(const rh_StateDict& dict, const std::string& prefix,
                      const std::vector<model::NamedTensor>& targets, DtypeRule rule) {
  return fit_into(dict, prefix, targets, false, rule);
}

}  // namespace rh::checkpoint

#include "abi/HostApi.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "abi/ComponentInstances.hpp"
#include "abi/HostError.hpp"
#include "abi/PluginCall.hpp"
#include "abi/StateDict.hpp"
#include "config/ConfigNode.hpp"

namespace rh::host {
namespace {

using config::Node;

const Node* node_of(const rh_ConfigNode* n) { return reinterpret_cast<const Node*>(n); }
const rh_ConfigNode* handle_of(const Node* n) { return reinterpret_cast<const rh_ConfigNode*>(n); }
rh_StringView sv(const std::string& s) { return {s.data(), s.size()}; }

// ---- Errors ---------------------------------------------------------------
rh_Error* Error_Create(rh_ErrorCode code, const char* message, size_t size) {
  return new_error(code, std::string(message ? message : "", message ? size : 0));
}
void Error_Destroy(rh_Error* error) { delete error; }
rh_ErrorCode Error_Code(const rh_Error* error) { return error->code; }
rh_StringView Error_Message(const rh_Error* error) { return sv(error->message); }

// ---- Logging --------------------------------------------------------------
spdlog::level::level_enum to_spdlog(rh_LogLevel level) {
  switch (level) {
    case RH_LOG_TRACE:
      return spdlog::level::trace;
    case RH_LOG_DEBUG:
      return spdlog::level::debug;
    case RH_LOG_INFO:
      return spdlog::level::info;
    case RH_LOG_WARN:
      return spdlog::level::warn;
    case RH_LOG_ERROR:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}
void Log(rh_Context* context, rh_LogLevel level, const char* message, size_t size) {
  spdlog::log(to_spdlog(level), "[{}] {}", context ? context->log_name : "plugin",
              std::string_view(message, size));
}
int32_t Log_IsEnabled(rh_Context*, rh_LogLevel level) {
  return spdlog::default_logger()->should_log(to_spdlog(level)) ? 1 : 0;
}

// ---- Configuration ---------------------------------------------------------
template <class Fn>
rh_Error* config_call(Fn&& fn) noexcept {
  try {
    fn();
    return nullptr;
  } catch (const config::ConfigError& e) {
    return new_error(RH_ERROR_INVALID_CONFIG, e.what());
  } catch (const std::exception& e) {
    return new_error(RH_ERROR_INTERNAL, e.what());
  }
}

rh_ConfigKind Config_Kind(const rh_ConfigNode* n) {
  switch (node_of(n)->kind()) {
    case Node::Kind::Null:
      return RH_CONFIG_NULL;
    case Node::Kind::Scalar:
      return RH_CONFIG_SCALAR;
    case Node::Kind::Sequence:
      return RH_CONFIG_SEQUENCE;
    case Node::Kind::Map:
      return RH_CONFIG_MAP;
  }
  return RH_CONFIG_NULL;
}
const rh_ConfigNode* Config_Get(const rh_ConfigNode* n, const char* key, size_t size) {
  std::string k(key, size);
  node_of(n)->record_lookup(k);
  return handle_of(node_of(n)->find(k));
}
size_t Config_Size(const rh_ConfigNode* n) {
  const Node* node = node_of(n);
  if (node->kind() == Node::Kind::Map) return node->map_items().size();
  if (node->kind() == Node::Kind::Sequence) return node->seq_items().size();
  return 0;
}
const rh_ConfigNode* Config_At(const rh_ConfigNode* n, size_t index) {
  const Node* node = node_of(n);
  if (node->kind() == Node::Kind::Sequence && index < node->seq_items().size())
    return handle_of(node->seq_items()[index].get());
  if (node->kind() == Node::Kind::Map && index < node->map_items().size()) {
    node->record_lookup(node->map_items()[index].first);
    return handle_of(node->map_items()[index].second.get());
  }
  return nullptr;
}
rh_StringView Config_KeyAt(const rh_ConfigNode* n, size_t index) {
  const Node* node = node_of(n);
  if (node->kind() == Node::Kind::Map && index < node->map_items().size())
    return sv(node->map_items()[index].first);
  return {"", 0};
}
rh_Error* Config_AsInt(const rh_ConfigNode* n, int64_t* out) {
  return config_call([&] { *out = node_of(n)->as_int(); });
}
rh_Error* Config_AsDouble(const rh_ConfigNode* n, double* out) {
  return config_call([&] { *out = node_of(n)->as_double(); });
}
rh_Error* Config_AsBool(const rh_ConfigNode* n, int32_t* out) {
  return config_call([&] { *out = node_of(n)->as_bool() ? 1 : 0; });
}
rh_Error* Config_AsString(const rh_ConfigNode* n, rh_StringView* out) {
  return config_call([&] { *out = sv(node_of(n)->as_string()); });
}
rh_StringView Config_Path(const rh_ConfigNode* n) { return sv(node_of(n)->path()); }
rh_StringView Config_Location(const rh_ConfigNode* n) { return sv(node_of(n)->location_text()); }
rh_Error* Config_Error(const rh_ConfigNode* n, const char* message, size_t size) {
  const Node* node = node_of(n);
  return new_error(
      RH_ERROR_INVALID_CONFIG,
      config::ConfigError(node->location(), node->path(), std::string(message, size)).what());
}

// ---- Run state ---------------------------------------------------------------
rh_Error* RunState_Get(rh_Context* context, rh_RunState* out) {
  if (context == nullptr || out == nullptr)
    return new_error(RH_ERROR_INVALID_ARGUMENT, "RunState_Get: NULL argument");
  rh_RunState state = context->services->run_state();
  size_t size = std::min(out->struct_size, sizeof state);
  if (size < sizeof(size_t))
    return new_error(RH_ERROR_INVALID_ARGUMENT, "RunState_Get: out->struct_size is not set");
  size_t caller_size = out->struct_size;
  std::memcpy(out, &state, size);
  out->struct_size = caller_size;
  return nullptr;
}
rh_Error* Metric_Put(rh_Context* context, const char* name, size_t size, double value) {
  if (context == nullptr || name == nullptr || size == 0)
    return new_error(RH_ERROR_INVALID_ARGUMENT, "Metric_Put: a metric needs a name");
  context->services->put_metric(std::string(name, size), value);
  return nullptr;
}

// ---- Devices -------------------------------------------------------------------
rh_Error* Device_Current(rh_Context* context, DLDevice* out) {
  if (context == nullptr || out == nullptr)
    return new_error(RH_ERROR_INVALID_ARGUMENT, "Device_Current: NULL argument");
  *out = context->services->device();
  return nullptr;
}

// ---- Checkpoints (ABI 1.1) ---------------------------------------------------------
rh_Error* checkpoint_call(rh_Context* context, const char* name, size_t size, bool save) {
  if (context == nullptr || name == nullptr)
    return new_error(RH_ERROR_INVALID_ARGUMENT, "Checkpoint_Save/Remove: NULL argument");
  const auto& handler =
      save ? context->services->checkpoint_save() : context->services->checkpoint_remove();
  const char* fn = save ? "Checkpoint_Save" : "Checkpoint_Remove";
  if (!handler)
    return new_error(
        RH_ERROR_FAILED_PRECONDITION,
        std::string(fn) + " called by " + context->log_name + " outside a training run");
  try {
    handler(std::string(name, size));
    return nullptr;
  } catch (const HostError& e) {
    return new_error(e.code(), e.what());
  } catch (const std::exception& e) {
    return new_error(RH_ERROR_INTERNAL, e.what());
  }
}
rh_Error* Checkpoint_Save(rh_Context* context, const char* name, size_t size) {
  return checkpoint_call(context, name, size, true);
}
rh_Error* Checkpoint_Remove(rh_Context* context, const char* name, size_t size) {
  return checkpoint_call(context, name, size, false);
}

}  // namespace
}  // namespace rh::host

// Behind the opaque rh_CheckpointIo: a component another one created.
struct rh_CheckpointIo {
  std::unique_ptr<rh::host::CheckpointIoInstance> io;
};

namespace rh::host {
namespace {

// ---- A checkpoint-IO component inside another (ABI 1.6) ---------------------------
rh_Error* CheckpointIo_Create(rh_Context* context, const rh_ConfigNode* config,
                              rh_CheckpointIo** out) {
  if (context == nullptr || config == nullptr || out == nullptr)
    return new_error(RH_ERROR_INVALID_ARGUMENT, "CheckpointIo_Create: NULL argument");
  const auto& factory = context->services->checkpoint_io_factory();
  if (!factory)
    return new_error(RH_ERROR_FAILED_PRECONDITION,
                     "CheckpointIo_Create called by " + context->log_name +
                         " outside the creation of the job's components");
  return guard_entry("CheckpointIo_Create", [&]() -> rh_Error* {
    *out = new rh_CheckpointIo{factory(*node_of(config))};
    return nullptr;
  });
}
void CheckpointIo_Destroy(rh_CheckpointIo* io) { delete io; }

// Calls one entry of the wrapped component; its error comes back named.
template <class Fn>
rh_Error* wrapped_call(rh_CheckpointIo* io, const char* fn_name, Fn&& fn) {
  if (io == nullptr || io->io == nullptr)
    return new_error(RH_ERROR_INVALID_ARGUMENT,
                     std::string("CheckpointIo_") + fn_name + ": NULL handle");
  const CheckpointIoInstance& c = *io->io;
  rh_Error* error = fn(c);
  if (error == nullptr) return nullptr;
  std::unique_ptr<rh_Error> owned(error);
  return new_error(owned->code, c.what() + " " + fn_name + ": " + owned->message);
}
rh_Error* CheckpointIo_Save(rh_CheckpointIo* io, const rh_CheckpointFileArgs* args) {
  return wrapped_call(io, "Save", [&](const CheckpointIoInstance& c) { return c.save(*args); });
}
rh_Error* CheckpointIo_Load(rh_CheckpointIo* io, const rh_CheckpointFileArgs* args) {
  return wrapped_call(io, "Load", [&](const CheckpointIoInstance& c) { return c.load(*args); });
}
rh_Error* CheckpointIo_Verify(rh_CheckpointIo* io, const rh_CheckpointFileArgs* args) {
  return wrapped_call(io, "Verify", [&](const CheckpointIoInstance& c) { return c.verify(*args); });
}
rh_Error* CheckpointIo_Flush(rh_CheckpointIo* io) {
  return wrapped_call(io, "Flush", [&](const CheckpointIoInstance& c) { return c.flush(); });
}
rh_Error* CheckpointIo_LoadSlices(rh_CheckpointIo* io, const rh_CheckpointFileArgs* args,
                                  const rh_CheckpointSlice* slices, size_t num_slices) {
  return wrapped_call(io, "LoadSlices", [&](const CheckpointIoInstance& c) {
    return c.load_slices(*args, slices, num_slices);
  });
}

// ---- State dicts -------------------------------------------------------------
rh_Error* StateDict_PutTensor(rh_StateDict* dict, const char* key, size_t key_size,
                              const DLManagedTensor* tensor) {
  if (dict == nullptr || tensor == nullptr || (key == nullptr && key_size > 0))
    return new_error(RH_ERROR_INVALID_ARGUMENT, "StateDict_PutTensor: NULL argument");
  return guard_entry("StateDict_PutTensor", [&]() -> rh_Error* {
    const std::string name(key == nullptr ? "" : key, key_size);
    // Checked and copied before the entry is touched: a refused tensor
    // leaves an existing entry of that name as it was.
    rh_StateDict::Entry entry = copy_tensor_entry(*tensor, name);
    dict->entries[name] = std::move(entry);
    return nullptr;
  });
}
rh_Error* StateDict_AllocTensor(rh_StateDict* dict, const char* key, size_t key_size,
                                DLDataType dtype, const int64_t* shape, int32_t ndim, void** data) {
  if (dict == nullptr || data == nullptr || (key == nullptr && key_size > 0))
    return new_error(RH_ERROR_INVALID_ARGUMENT, "StateDict_AllocTensor: NULL argument");
  return guard_entry("StateDict_AllocTensor", [&]() -> rh_Error* {
    const std::string name(key == nullptr ? "" : key, key_size);
    const size_t size =
        checked_tensor_bytes(dtype, shape, ndim, "StateDict_AllocTensor: tensor '" + name + "'");
    *data = alloc_tensor_entry(*dict, name, dtype, std::vector<int64_t>(shape, shape + ndim), size);
    return nullptr;
  });
}
rh_Error* StateDict_SetChecksum(rh_StateDict* dict, const char* key, size_t key_size,
                                uint32_t crc32) {
  if (dict == nullptr || (key == nullptr && key_size > 0))
    return new_error(RH_ERROR_INVALID_ARGUMENT, "StateDict_SetChecksum: NULL argument");
  const std::string name(key == nullptr ? "" : key, key_size);
  const auto it = dict->entries.find(name);
  if (it == dict->entries.end() || !it->second.is_tensor)
    return new_error(RH_ERROR_NOT_FOUND, "StateDict_SetChecksum: no tensor named '" + name + "'");
  it->second.crc32 = crc32;
  return nullptr;
}
rh_Error* StateDict_PutBytes(rh_StateDict* dict, const char* key, size_t key_size, const void* data,
                             size_t size) {
  if (dict == nullptr || (data == nullptr && size > 0))
    return new_error(RH_ERROR_INVALID_ARGUMENT, "StateDict_PutBytes: NULL argument");
  rh_StateDict::Entry e;
  const auto* bytes = static_cast<const uint8_t*>(data);
  e.bytes.assign(bytes, bytes + size);
  dict->entries[std::string(key, key_size)] = std::move(e);
  return nullptr;
}
rh_Error* not_found(const char* what, const char* key, size_t key_size) {
  return new_error(RH_ERROR_NOT_FOUND,
                   std::string(what) + ": no " +
                       (std::strcmp(what, "StateDict_GetTensor") == 0 ? "tensor" : "blob") +
                       " named '" + std::string(key, key_size) + "'");
}
rh_Error* StateDict_GetTensor(const rh_StateDict* dict, const char* key, size_t key_size,
                              const DLManagedTensor** out) {
  auto* d = const_cast<rh_StateDict*>(dict);
  auto it = d->entries.find(std::string(key, key_size));
  if (it == d->entries.end() || !it->second.is_tensor)
    return not_found("StateDict_GetTensor", key, key_size);
  rh_StateDict::Entry& e = it->second;
  e.view = DLManagedTensor{};
  e.view.dl_tensor.data = const_cast<uint8_t*>(e.data());
  e.view.dl_tensor.device = DLDevice{kDLCPU, 0};
  e.view.dl_tensor.ndim = static_cast<int32_t>(e.shape.size());
  e.view.dl_tensor.dtype = e.dtype;
  e.view.dl_tensor.shape = e.shape.data();
  *out = &e.view;
  return nullptr;
}
rh_Error* StateDict_GetBytes(const rh_StateDict* dict, const char* key, size_t key_size,
                             rh_StringView* out) {
  auto it = dict->entries.find(std::string(key, key_size));
  if (it == dict->entries.end() || it->second.is_tensor)
    return not_found("StateDict_GetBytes", key, key_size);
  *out = {reinterpret_cast<const char*>(it->second.data()), it->second.size()};
  return nullptr;
}
size_t StateDict_Size(const rh_StateDict* dict) { return dict->entries.size(); }
rh_StringView StateDict_KeyAt(const rh_StateDict* dict, size_t index) {
  if (index >= dict->entries.size()) return {"", 0};
  auto it = dict->entries.begin();
  std::advance(it, static_cast<long>(index));
  return sv(it->first);
}

}  // namespace

HostServices::HostServices() : state_{} {
  std::memset(&api_, 0, sizeof api_);
  api_.struct_size = RH_HOST_API_STRUCT_SIZE;
  api_.abi_major = RH_ABI_VERSION_MAJOR;
  api_.abi_minor = RH_ABI_VERSION_MINOR;
  api_.Error_Create = &Error_Create;
  api_.Error_Destroy = &Error_Destroy;
  api_.Error_Code = &Error_Code;
  api_.Error_Message = &Error_Message;
  api_.Log = &Log;
  api_.Log_IsEnabled = &Log_IsEnabled;
  api_.Config_Kind = &Config_Kind;
  api_.Config_Get = &Config_Get;
  api_.Config_Size = &Config_Size;
  api_.Config_At = &Config_At;
  api_.Config_KeyAt = &Config_KeyAt;
  api_.Config_AsInt = &Config_AsInt;
  api_.Config_AsDouble = &Config_AsDouble;
  api_.Config_AsBool = &Config_AsBool;
  api_.Config_AsString = &Config_AsString;
  api_.Config_Path = &Config_Path;
  api_.Config_Location = &Config_Location;
  api_.Config_Error = &Config_Error;
  api_.Device_Current = &Device_Current;
  api_.RunState_Get = &RunState_Get;
  api_.Metric_Put = &Metric_Put;
  api_.StateDict_PutTensor = &StateDict_PutTensor;
  api_.StateDict_PutBytes = &StateDict_PutBytes;
  api_.StateDict_GetTensor = &StateDict_GetTensor;
  api_.StateDict_GetBytes = &StateDict_GetBytes;
  api_.StateDict_Size = &StateDict_Size;
  api_.StateDict_KeyAt = &StateDict_KeyAt;
  api_.Checkpoint_Save = &Checkpoint_Save;
  api_.Checkpoint_Remove = &Checkpoint_Remove;
  api_.CheckpointIo_Create = &CheckpointIo_Create;
  api_.CheckpointIo_Destroy = &CheckpointIo_Destroy;
  api_.CheckpointIo_Save = &CheckpointIo_Save;
  api_.CheckpointIo_Load = &CheckpointIo_Load;
  api_.CheckpointIo_Verify = &CheckpointIo_Verify;
  api_.CheckpointIo_Flush = &CheckpointIo_Flush;
  api_.CheckpointIo_LoadSlices = &CheckpointIo_LoadSlices;
  api_.StateDict_AllocTensor = &StateDict_AllocTensor;
  api_.StateDict_SetChecksum = &StateDict_SetChecksum;
  state_.struct_size = RH_RUN_STATE_STRUCT_SIZE;
  state_.world_size = 1;
}

rh_Context* HostServices::new_context(const std::string& plugin, const std::string& component) {
  std::lock_guard<std::mutex> lock(mutex_);
  contexts_.push_back(std::make_unique<rh_Context>(
      rh_Context{plugin, component, component.empty() ? plugin : component, this}));
  return contexts_.back().get();
}

void HostServices::set_run_state(const rh_RunState& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = state;
  state_.struct_size = RH_RUN_STATE_STRUCT_SIZE;
}

rh_RunState HostServices::run_state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

void HostServices::put_metric(std::string name, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_.emplace_back(std::move(name), value);
}

void HostServices::set_device(DLDevice device) {
  std::lock_guard<std::mutex> lock(mutex_);
  device_ = device;
}

DLDevice HostServices::device() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return device_;
}

void HostServices::set_checkpoint_handlers(CheckpointHandler save, CheckpointHandler remove) {
  checkpoint_save_ = std::move(save);
  checkpoint_remove_ = std::move(remove);
}

void HostServices::set_checkpoint_io_factory(CheckpointIoFactory factory) {
  checkpoint_io_factory_ = std::move(factory);
}

std::vector<std::pair<std::string, double>> HostServices::take_metrics() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(metrics_, {});
}

}  // namespace rh::host

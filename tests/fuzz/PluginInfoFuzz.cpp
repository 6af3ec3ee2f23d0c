// How the bytes become an rh_PluginInfo. A hostile plugin controls every
// value, but its memory is laid out as it says: each string is a heap buffer
// of exactly its size (no terminating NUL), the component array holds
// num_components entries of the stride its first entry declares, a vtable
// is a buffer of its declared struct_size, and an rh_PluginInfo whose
// struct_size is below the host's sizeof is a buffer of only that many bytes.
// So ASan reports any read the handshake makes past what the plugin said.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "FuzzEntries.hpp"
#include "abi/HostError.hpp"
#include "abi/PluginRegistry.hpp"

namespace rh::fuzz {
namespace {

// Consumes the input front to back; zeros once it runs out.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | u8();
    return v;
  }
  uint64_t u64() { return static_cast<uint64_t>(u32()) << 32 | u32(); }
  std::vector<char> bytes(size_t n) {
    std::vector<char> out;
    for (size_t i = 0; i < n && pos_ < size_; ++i) out.push_back(static_cast<char>(u8()));
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Everything the fake plugin points at, alive for the handshake.
struct Arena {
  std::vector<std::unique_ptr<char[]>> blocks;
  char* allocate(size_t n) {
    blocks.push_back(std::make_unique<char[]>(std::max<size_t>(n, 1)));
    std::memset(blocks.back().get(), 0, std::max<size_t>(n, 1));
    return blocks.back().get();
  }
};

void dummy_function() {}

// A struct size: the host's own, the ABI 1.0 minimum, a little more or less,
// or any 64-bit value.
size_t pick_size(ByteReader& in, size_t host_size, size_t min_size) {
  switch (in.u8() % 6) {
    case 0:
      return host_size;
    case 1:
      return min_size;
    case 2:
      return host_size + 8 * (in.u8() % 16);
    case 3:
      return min_size - std::min<size_t>(min_size, in.u8() % 16);
    case 4:
      return in.u8();
    default:
      return static_cast<size_t>(in.u64());
  }
}

rh_StringView pick_string(ByteReader& in, Arena& arena) {
  const uint8_t mode = in.u8();
  if (mode % 8 == 7) return rh_StringView{nullptr, static_cast<size_t>(in.u64())};  // NULL data
  const std::vector<char> text = in.bytes(in.u8() % 64);
  char* buffer = arena.allocate(text.size());
  std::copy(text.begin(), text.end(), buffer);
  return rh_StringView{text.empty() && mode % 8 == 6 ? nullptr : buffer, text.size()};
}

// A vtable buffer of its declared size (capped: a plugin cannot own more
// memory than it has), its function slots each NULL or a function.
const void* pick_vtable(ByteReader& in, Arena& arena, size_t host_size) {
  const uint8_t mode = in.u8();
  if (mode % 8 == 0) return nullptr;
  const size_t declared = pick_size(in, host_size, sizeof(size_t));
  // The plugin owns `declared` bytes; the host may read at most its own
  // sizeof of them, so a huge declared size needs no more than 4 KiB here.
  const size_t allocated = std::max(sizeof(size_t), std::min<size_t>(declared, 4096));
  char* buffer = arena.allocate(allocated);
  std::memcpy(buffer, &declared, sizeof declared);
  const uint32_t nulls = in.u32();
  void (*fn)() = &dummy_function;
  for (size_t slot = 1; (slot + 1) * sizeof(void*) <= allocated; ++slot)
    if ((nulls >> (slot % 32) & 1u) == 0)
      std::memcpy(buffer + slot * sizeof(void*), &fn, sizeof fn);
  return buffer;
}

}  // namespace

void plugin_info(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  Arena arena;

  rh_PluginInfo info;
  std::memset(&info, 0, sizeof info);
  info.struct_size =
      pick_size(in, sizeof(rh_PluginInfo), RH_STRUCT_SIZE(rh_PluginInfo, num_components));
  info.abi_major = in.u8() % 4 == 0 ? in.u32() : RH_ABI_VERSION_MAJOR;
  info.abi_minor = in.u8() % 4 == 0 ? in.u32() : RH_ABI_VERSION_MINOR;
  info.name = pick_string(in, arena);
  info.version = pick_string(in, arena);
  info.native_tag.struct_size = pick_size(in, sizeof(rh_NativeTag), RH_NATIVE_TAG_STRUCT_SIZE);
  info.native_tag.torch_version = pick_string(in, arena);
  info.native_tag.device = pick_string(in, arena);
  info.native_tag.cxx11_abi = static_cast<int32_t>(in.u32());

  // 0..6 entries; or a count (any 64-bit value) with a NULL array; bit 7:
  // a count of 0..6 with a NULL array.
  const uint8_t count_mode = in.u8();
  const bool hostile_count = count_mode % 8 == 7;
  const size_t allocated_components = hostile_count || (count_mode & 0x80u) ? 0 : count_mode % 8;
  info.num_components = hostile_count ? static_cast<size_t>(in.u64()) : count_mode % 8;
  size_t stride = pick_size(in, sizeof(rh_Component), RH_COMPONENT_STRUCT_SIZE);
  // Honest layout: an array of that many entries of that stride must fit
  // in memory (a plugin claiming more than it owns is not checkable).
  const size_t stride_cap = 4096;
  if (stride > stride_cap) stride = stride_cap;
  if (allocated_components > 0) {
    const size_t entry_bytes = std::max(stride, sizeof(rh_Component));
    char* array = arena.allocate(allocated_components * entry_bytes);
    for (size_t i = 0; i < allocated_components; ++i) {
      rh_Component c;
      std::memset(&c, 0, sizeof c);
      c.struct_size =
          i == 0 ? stride : pick_size(in, sizeof(rh_Component), RH_COMPONENT_STRUCT_SIZE);
      // Any 32 bits, as a C plugin may write them: stored as bytes, never
      // loaded as the enum here (that alone would be undefined behaviour).
      const uint8_t kind_mode = in.u8();
      const uint32_t kind = kind_mode < 200 ? kind_mode % 3u : in.u32();
      static_assert(sizeof kind == sizeof c.kind);
      std::memcpy(&c.kind, &kind, sizeof kind);
      c.type_name = pick_string(in, arena);
      c.description = pick_string(in, arena);
      const size_t vtable_size = kind == RH_COMPONENT_STRATEGY ? sizeof(rh_StrategyVtable)
                                 : kind == RH_COMPONENT_HOOK   ? sizeof(rh_HookVtable)
                                                               : sizeof(rh_CheckpointIoVtable);
      c.vtable = pick_vtable(in, arena, vtable_size);
      std::memcpy(array + i * entry_bytes, &c, sizeof c);
    }
    info.components = reinterpret_cast<const rh_Component*>(array);
  }
  const uint8_t entries = in.u8();
  if (entries & 1u) info.Init = [](const rh_InitArgs*) -> rh_Error* { return nullptr; };
  if (entries & 2u) info.Shutdown = [] {};

  // A struct_size below the host's sizeof: only that many bytes exist.
  const rh_PluginInfo* shown = &info;
  if (info.struct_size < sizeof info) {
    const size_t bytes = std::max(info.struct_size, sizeof(size_t));
    char* prefix = arena.allocate(bytes);
    std::memcpy(prefix, &info, bytes);
    shown = reinterpret_cast<const rh_PluginInfo*>(prefix);
  }

  const host::NativeTag host_tag{"1.13.0", "cpu", 1};
  try {
    (void)host::read_plugin_info(shown, host_tag);
  } catch (const host::HostError&) {
    // Refused with a reason: what the handshake promises.
  }
}

}  // namespace rh::fuzz

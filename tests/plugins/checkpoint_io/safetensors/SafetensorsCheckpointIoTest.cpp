// The `safetensors` checkpoint IO (plugins/checkpoint_io/safetensors), driven
// through its vtable by the real host table: round trips of every dtype,
// strided tensors and byte blobs; the file format checked against bytes
// written by hand from the spec, an independent reader and Python; every
// kind of damage detected with its message; the atomic write.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>

#include "common/PluginTestHost.hpp"
#include "common/PythonTorch.hpp"
#include "rh/cpp/crc32.hpp"

namespace rh::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint8_t kBool = 6;  // kDLBool (DLPack >= 0.8)

struct Result {
  rh_ErrorCode code = RH_ERROR_OK;
  std::string message;
};

Result take(rh_Error* e) {
  if (e == nullptr) return {};
  Result r{e->code, e->message};
  delete e;
  return r;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

std::string u64le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

// A safetensors file from its parts: header length, header text, data.
std::string file_of(const std::string& header, const std::string& data) {
  return u64le(header.size()) + header + data;
}

// CRC-32 bit by bit (the definition, not the plugin's tables).
uint32_t reference_crc32(const std::string& bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// ---- An independent reader: a minimal JSON parser for the header ------------
struct J {
  enum Kind { Object, Array, String, Number } kind = Number;
  std::vector<std::pair<std::string, J>> members;
  std::vector<J> items;
  std::string text;  // string value, or the number as written
  const J& at(const std::string& key) const {
    for (const auto& m : members)
      if (m.first == key) return m.second;
    throw std::runtime_error("no key " + key);
  }
};

J parse_json(const std::string& s, size_t& i) {
  while (s[i] == ' ') ++i;
  J v;
  if (s[i] == '{' || s[i] == '[') {
    const bool object = s[i] == '{';
    v.kind = object ? J::Object : J::Array;
    ++i;
    while (s[i] != (object ? '}' : ']')) {
      if (object) {
        J key = parse_json(s, i);
        if (s[i++] != ':') throw std::runtime_error("expected :");
        v.members.emplace_back(key.text, parse_json(s, i));
      } else {
        v.items.push_back(parse_json(s, i));
      }
      if (s[i] == ',') ++i;
    }
    ++i;
  } else if (s[i] == '"') {
    v.kind = J::String;
    for (++i; s[i] != '"'; ++i) v.text += s[i] == '\\' ? s[++i] : s[i];
    ++i;
  } else {
    while (isdigit(static_cast<unsigned char>(s[i]))) v.text += s[i++];
  }
  while (s[i] == ' ') ++i;
  return v;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.load("rh_ckpt_io_safetensors");
    io_ = host_.create_checkpoint_io("{type: safetensors}");
    fs::create_directories(dir());
  }

  fs::path dir() const { return host_.dir / "ckpt"; }
  fs::path file(const std::string& stem = "model") const { return dir() / (stem + ".safetensors"); }
  const rh_HostApi* api() const { return host_.api(); }

  using Entry = rh_Error* (host::CheckpointIoInstance::*)(const rh_CheckpointFileArgs&) const;
  Result call(const host::CheckpointIoInstance& io, Entry fn, rh_StateDict* dict,
              const std::string& stem, const std::string& directory) {
    rh_CheckpointFileArgs args{RH_CHECKPOINT_FILE_ARGS_STRUCT_SIZE,
                               {directory.data(), directory.size()},
                               {stem.data(), stem.size()},
                               dict};
    return take((io.*fn)(args));
  }
  // Save, then Flush (the file is durable only after it), as the host does.
  Result save(rh_StateDict& dict, const std::string& stem = "model") {
    Result r = call(*io_, &host::CheckpointIoInstance::save, &dict, stem, dir().string());
    if (r.code != RH_ERROR_OK) return r;
    return take(io_->flush());
  }
  Result load(rh_StateDict& dict, const std::string& stem = "model") {
    return call(*io_, &host::CheckpointIoInstance::load, &dict, stem, dir().string());
  }
  Result verify(const std::string& stem = "model") {
    return call(*io_, &host::CheckpointIoInstance::verify, nullptr, stem, dir().string());
  }

  template <class T>
  void put(rh_StateDict& dict, const std::string& key, DLDataType dtype, std::vector<int64_t> shape,
           const std::vector<T>& values, const int64_t* strides = nullptr) {
    DLManagedTensor t{};
    t.dl_tensor.data = const_cast<T*>(values.data());
    t.dl_tensor.device = {kDLCPU, 0};
    t.dl_tensor.ndim = static_cast<int32_t>(shape.size());
    t.dl_tensor.dtype = dtype;
    t.dl_tensor.shape = shape.data();
    t.dl_tensor.strides = const_cast<int64_t*>(strides);
    ASSERT_EQ(take(api()->StateDict_PutTensor(&dict, key.data(), key.size(), &t)).message, "");
  }
  void put_bytes(rh_StateDict& dict, const std::string& key, const std::string& bytes) {
    ASSERT_EQ(
        take(api()->StateDict_PutBytes(&dict, key.data(), key.size(), bytes.data(), bytes.size()))
            .message,
        "");
  }
  // The tensor `key` of `dict` as "code/bits [shape] <hex bytes>".
  std::string tensor(const rh_StateDict& dict, const std::string& key) {
    const DLManagedTensor* t = nullptr;
    Result r = take(api()->StateDict_GetTensor(&dict, key.data(), key.size(), &t));
    if (r.code != RH_ERROR_OK) return r.message;
    const DLTensor& d = t->dl_tensor;
    std::string out = std::to_string(d.dtype.code) + "/" + std::to_string(d.dtype.bits) + " [";
    size_t numel = 1;
    for (int i = 0; i < d.ndim; ++i) {
      out += (i ? "," : "") + std::to_string(d.shape[i]);
      numel *= static_cast<size_t>(d.shape[i]);
    }
    out += "] ";
    const auto* p = static_cast<const unsigned char*>(d.data);
    char hex[3];
    for (size_t i = 0; i < numel * d.dtype.bits / 8; ++i) {
      std::snprintf(hex, sizeof hex, "%02x", p[i]);
      out += hex;
    }
    return out;
  }
  std::string bytes(const rh_StateDict& dict, const std::string& key) {
    rh_StringView v{};
    Result r = take(api()->StateDict_GetBytes(&dict, key.data(), key.size(), &v));
    return r.code == RH_ERROR_OK ? str(v) : "error: " + r.message;
  }

  // Saves a small model: a (F32 [2, 2]) and b (I64 [3]) and blob c.
  void save_small_model() {
    rh_StateDict dict;
    put<float>(dict, "a", {kDLFloat, 32, 1}, {2, 2}, {1, 2, 3, 4});
    put<int64_t>(dict, "b", {kDLInt, 64, 1}, {3}, {7, 8, 9});
    put_bytes(dict, "c", "xyz");
    ASSERT_EQ(save(dict).message, "");
  }
  // The data offset of tensor `name` in the file.
  uint64_t data_offset_of(const std::string& name) {
    const std::string raw = read_bytes(file());
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
      n = (n << 8) | static_cast<unsigned char>(raw[static_cast<size_t>(i)]);
    size_t pos = 0;
    J header = parse_json(raw.substr(8, n), pos);
    return 8 + n + std::stoull(header.at(name).at("data_offsets").items[0].text);
  }
  // Load and Verify both fail with DATA_LOSS and this message (after the path).
  void expect_damage(const std::string& message, rh_ErrorCode code = RH_ERROR_DATA_LOSS) {
    rh_StateDict dict;
    Result l = load(dict);
    EXPECT_EQ(l.code, code) << l.message;
    EXPECT_EQ(l.message, file().string() + ": " + message);
    Result v = verify();
    EXPECT_EQ(v.code, code) << v.message;
    EXPECT_EQ(v.message, file().string() + ": " + message);
  }

  PluginTestHost host_;
  std::unique_ptr<host::CheckpointIoInstance> io_;
};

TEST_F(SafetensorsTest, DescribesItself) {
  host::Plugin& p = host_.load("rh_ckpt_io_safetensors");
  EXPECT_EQ(p.name, "rh_ckpt_io_safetensors");
  EXPECT_FALSE(p.tag.links_torch());
  ASSERT_EQ(p.components.size(), 1u);
  EXPECT_EQ(p.components[0].kind, RH_COMPONENT_CHECKPOINT_IO);
  EXPECT_EQ(p.components[0].type_name, "safetensors");
  EXPECT_TRUE(io_->has_verify());
  EXPECT_TRUE(io_->has_flush());  // Flush makes the saved files durable
}

TEST_F(SafetensorsTest, RejectsBadConfig) {
  try {
    host_.create_checkpoint_io("{type: safetensors, checksum: maybe}");
    FAIL() << "created";
  } catch (const host::HostError& e) {
    EXPECT_THAT(e.what(), HasSubstr("checkpoint_io.checksum"));
  }
  try {
    host_.create_checkpoint_io("{type: safetensors, checksums: true}");
    FAIL() << "created";
  } catch (const host::HostError& e) {
    EXPECT_THAT(e.what(), HasSubstr("checksums"));  // unknown key, reported by the host
  }
}

TEST_F(SafetensorsTest, RoundTripsEveryDtype) {
  rh_StateDict dict;
  put<double>(dict, "f64", {kDLFloat, 64, 1}, {2}, {1.5, -2.25});
  put<float>(dict, "f32", {kDLFloat, 32, 1}, {2, 3}, {0, 1, 2, 3, 4, 5.5f});
  put<uint16_t>(dict, "f16", {kDLFloat, 16, 1}, {3}, {0x3C00, 0xC000, 0x7BFF});
  put<uint16_t>(dict, "bf16", {kDLBfloat, 16, 1}, {2}, {0x3F80, 0xC040});
  put<int64_t>(dict, "i64", {kDLInt, 64, 1}, {1}, {-(int64_t{1} << 40)});
  put<int32_t>(dict, "i32", {kDLInt, 32, 1}, {2}, {-7, 1 << 30});
  put<int16_t>(dict, "i16", {kDLInt, 16, 1}, {2}, {-300, 300});
  put<int8_t>(dict, "i8", {kDLInt, 8, 1}, {3}, {-128, 0, 127});
  put<uint64_t>(dict, "u64", {kDLUInt, 64, 1}, {1}, {~uint64_t{0}});
  put<uint32_t>(dict, "u32", {kDLUInt, 32, 1}, {1}, {0xDEADBEEF});
  put<uint16_t>(dict, "u16", {kDLUInt, 16, 1}, {1}, {0xBEEF});
  put<uint8_t>(dict, "u8", {kDLUInt, 8, 1}, {2, 2}, {0, 1, 254, 255});
  put<uint8_t>(dict, "bool", {kBool, 8, 1}, {3}, {1, 0, 1});
  put<float>(dict, "scalar", {kDLFloat, 32, 1}, {}, {42});
  put<float>(dict, "empty", {kDLFloat, 32, 1}, {2, 0}, {});
  ASSERT_EQ(save(dict).message, "");
  EXPECT_EQ(verify().message, "");

  rh_StateDict loaded;
  ASSERT_EQ(load(loaded).message, "");
  ASSERT_EQ(api()->StateDict_Size(&loaded), api()->StateDict_Size(&dict));
  for (size_t i = 0; i < api()->StateDict_Size(&dict); ++i) {
    const std::string key = str(api()->StateDict_KeyAt(&dict, i));
    EXPECT_EQ(tensor(loaded, key), tensor(dict, key)) << key;
  }
  EXPECT_EQ(tensor(loaded, "bool"), "6/8 [3] 010001");
  EXPECT_EQ(tensor(loaded, "bf16"), "4/16 [2] 803f40c0");
  EXPECT_EQ(tensor(loaded, "scalar"), "2/32 [] 00002842");
  EXPECT_EQ(tensor(loaded, "empty"), "2/32 [2,0] ");
}

TEST_F(SafetensorsTest, StridedTensorsAreWrittenInCOrder) {
  // A 2x3 float tensor viewed transposed: 3x2 with strides {1, 3}; the host's
  // PutTensor copies it to C order.
  rh_StateDict dict;
  const int64_t strides[2] = {1, 3};
  put<float>(dict, "t", {kDLFloat, 32, 1}, {3, 2}, {0, 1, 2, 3, 4, 5}, strides);
  ASSERT_EQ(save(dict).message, "");
  rh_StateDict loaded;
  ASSERT_EQ(load(loaded).message, "");
  // 0 3 1 4 2 5
  EXPECT_EQ(tensor(loaded, "t"), "2/32 [3,2] 00000000000040400000803f00008040000000400000a040");
}

// A host whose GetTensor hands out strided views (the ABI allows it): the
// plugin gathers them itself.
std::vector<int16_t> g_strided_data = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
int64_t g_strided_shape[2] = {2, 3};
int64_t g_strided_strides[2] = {1, 4};  // column view of a 4x3 buffer, offset 2 elements
DLManagedTensor g_strided_view{};

rh_Error* StridedGetTensor(const rh_StateDict*, const char*, size_t, const DLManagedTensor** out) {
  g_strided_view.dl_tensor =
      DLTensor{g_strided_data.data(), {kDLCPU, 0},        2, {kDLInt, 16, 1}, g_strided_shape,
               g_strided_strides,     2 * sizeof(int16_t)};
  *out = &g_strided_view;
  return nullptr;
}

TEST_F(SafetensorsTest, StridedViewsFromTheHostAreGathered) {
  rh_StateDict dict;
  put<int16_t>(dict, "s", {kDLInt, 16, 1}, {1}, {0});
  auto& get_tensor = host_.services.mutable_api().StateDict_GetTensor;
  const auto original = get_tensor;
  get_tensor = &StridedGetTensor;
  Result r = save(dict);
  get_tensor = original;
  ASSERT_EQ(r.message, "");
  rh_StateDict loaded;
  ASSERT_EQ(load(loaded).message, "");
  // Elements at 2 + i*1 + j*4: [[2, 6, 10], [3, 7, 11]]
  EXPECT_EQ(tensor(loaded, "s"), "0/16 [2,3] 020006000a00030007000b00");
}

TEST_F(SafetensorsTest, ByteBlobsRoundTripAsPrefixedU8Tensors) {
  rh_StateDict dict;
  const std::string binary("\0\xff\x01zero\0", 8);
  put_bytes(dict, "optimizer/meta", binary);
  put_bytes(dict, "empty", "");
  put_bytes(dict, "caf\xc3\xa9", "{\"lr\": 0.1}");
  put<float>(dict, "w", {kDLFloat, 32, 1}, {1}, {1});
  ASSERT_EQ(save(dict).message, "");

  rh_StateDict loaded;
  ASSERT_EQ(load(loaded).message, "");
  EXPECT_EQ(api()->StateDict_Size(&loaded), 4u);
  EXPECT_EQ(bytes(loaded, "optimizer/meta"), binary);
  EXPECT_EQ(bytes(loaded, "empty"), "");
  EXPECT_EQ(bytes(loaded, "caf\xc3\xa9"), "{\"lr\": 0.1}");
  EXPECT_THAT(tensor(loaded, "optimizer/meta"), HasSubstr("no tensor"));  // a blob, not a tensor
  EXPECT_EQ(tensor(loaded, "w"), "2/32 [1] 0000803f");

  // In the file: U8 1-D tensors named __bytes__.<key>.
  const std::string raw = read_bytes(file());
  size_t pos = 0;
  J header = parse_json(raw.substr(8, raw.size() - 8), pos);
  const J& blob = header.at("__bytes__.optimizer/meta");
  EXPECT_EQ(blob.at("dtype").text, "U8");
  ASSERT_EQ(blob.at("shape").items.size(), 1u);
  EXPECT_EQ(blob.at("shape").items[0].text, "8");
}

TEST_F(SafetensorsTest, WritesTheSpecsBytesForATinyTensor) {
  // Hand-written from the format: u64 LE header size, JSON padded with spaces
  // to a multiple of 8, then the little-endian floats 1.0 and 2.0.
  // 2e3fa576 is zlib.crc32(b"\x00\x00\x80\x3f\x00\x00\x00\x40").
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  const std::string with_crc = std::string("\x80\0\0\0\0\0\0\0", 8) +
                               "{\"__metadata__\":{\"format\":\"pt\",\"checksum\":\"crc32\","
                               "\"crc32:x\":\"2e3fa576\"},"
                               "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"
                               "   " +
                               data;
  rh_StateDict dict;
  put<float>(dict, "x", {kDLFloat, 32, 1}, {2}, {1.0f, 2.0f});
  ASSERT_EQ(save(dict).message, "");
  EXPECT_EQ(read_bytes(file()), with_crc);
  EXPECT_EQ(reference_crc32(data), 0x2e3fa576u);

  auto plain = host_.create_checkpoint_io("{type: safetensors, checksum: false}");
  ASSERT_EQ(call(*plain, &host::CheckpointIoInstance::save, &dict, "plain", dir().string()).message,
            "");
  EXPECT_EQ(read_bytes(file("plain")),
            std::string("\x58\0\0\0\0\0\0\0", 8) +
                "{\"__metadata__\":{\"format\":\"pt\"},"
                "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"
                "   " +
                data);
  EXPECT_EQ(
      call(*plain, &host::CheckpointIoInstance::verify, nullptr, "plain", dir().string()).message,
      "");
}

TEST_F(SafetensorsTest, AnIndependentReaderAgreesWithTheFile) {
  EXPECT_EQ(reference_crc32("123456789"), 0xcbf43926u);  // the CRC-32 check value
  rh_StateDict dict;
  std::vector<float> big(1000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  put<float>(dict, "layer.0.weight", {kDLFloat, 32, 1}, {10, 100}, big);
  put<uint16_t>(dict, "layer.0.bias", {kDLBfloat, 16, 1}, {3}, {1, 2, 3});
  put<int64_t>(dict, "step", {kDLInt, 64, 1}, {}, {12345});
  put<uint8_t>(dict, "mask", {kBool, 8, 1}, {5}, {1, 0, 0, 1, 1});
  put_bytes(dict, "rng", "state");
  ASSERT_EQ(save(dict).message, "");

  const std::string raw = read_bytes(file());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(raw[static_cast<size_t>(i)]);
  ASSERT_EQ((8 + n) % 8, 0u);
  const std::string json = raw.substr(8, n);
  size_t pos = 0;
  J header = parse_json(json, pos);
  EXPECT_EQ(pos, json.size());
  ASSERT_EQ(header.kind, J::Object);
  EXPECT_EQ(header.members.at(0).first, "__metadata__");
  const J& meta = header.at("__metadata__");
  EXPECT_EQ(meta.at("format").text, "pt");
  EXPECT_EQ(meta.at("checksum").text, "crc32");

  // Tensors tile the data section in the order written, each aligned to its
  // element size, and carry the bytes and checksum put in.
  const std::string data = raw.substr(8 + n);
  uint64_t expected_begin = 0;
  std::vector<std::string> order;
  for (const auto& [name, t] : header.members) {
    if (name == "__metadata__") continue;
    order.push_back(name);
    const uint64_t begin = std::stoull(t.at("data_offsets").items[0].text);
    const uint64_t end = std::stoull(t.at("data_offsets").items[1].text);
    EXPECT_EQ(begin, expected_begin) << name;
    expected_begin = end;
    const std::string dtype = t.at("dtype").text;
    const uint64_t elem = dtype == "F32" ? 4 : dtype == "I64" ? 8 : dtype == "BF16" ? 2 : 1;
    EXPECT_EQ((8 + n + begin) % elem, 0u) << name;
    char crc[9];
    std::snprintf(crc, sizeof crc, "%08x", reference_crc32(data.substr(begin, end - begin)));
    EXPECT_EQ(meta.at("crc32:" + name).text, crc) << name;
  }
  EXPECT_EQ(expected_begin, data.size());
  EXPECT_EQ(order, (std::vector<std::string>{"step", "layer.0.weight", "layer.0.bias",
                                             "__bytes__.rng", "mask"}));
  const J& w = header.at("layer.0.weight");
  EXPECT_EQ(w.at("dtype").text, "F32");
  EXPECT_EQ(w.at("shape").items[0].text, "10");
  EXPECT_EQ(w.at("shape").items[1].text, "100");
  const uint64_t wb = std::stoull(w.at("data_offsets").items[0].text);
  EXPECT_EQ(0, std::memcmp(data.data() + wb, big.data(), big.size() * sizeof(float)));
}

// Python's json + torch.frombuffer (and safetensors when installed) read it.
TEST_F(SafetensorsTest, PythonReadsTheFile) {
  RH_REQUIRE_PYTHON_TORCH(RH_INSTALL_DEPS);  // fails under CI when missing
  rh_StateDict dict;
  put<float>(dict, "w", {kDLFloat, 32, 1}, {2, 2}, {1, 2, 3, 4.5f});
  put<uint16_t>(dict, "h", {kDLBfloat, 16, 1}, {2}, {0x3F80, 0xC040});  // 1, -3
  put<int64_t>(dict, "n", {kDLInt, 64, 1}, {}, {-5});
  put<uint8_t>(dict, "m", {kBool, 8, 1}, {3}, {1, 0, 1});
  put_bytes(dict, "blob", "hi");
  ASSERT_EQ(save(dict).message, "");
  const fs::path script = host_.dir.write("read.py", R"(
import json, struct, sys, zlib
import torch
raw = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
header = json.loads(raw[8:8 + n])
meta = header.pop('__metadata__')
data = raw[8 + n:]
types = {'F32': torch.float32, 'BF16': torch.bfloat16, 'I64': torch.int64, 'BOOL': torch.bool,
         'U8': torch.uint8}
for name in sorted(header):
    info = header[name]
    b, e = info['data_offsets']
    chunk = data[b:e]
    assert meta['crc32:' + name] == '%08x' % zlib.crc32(chunk), name
    t = torch.frombuffer(bytearray(chunk), dtype=types[info['dtype']]).reshape(info['shape'])
    print(name, info['dtype'], list(t.shape), t.flatten().tolist())
try:
    from safetensors.torch import load_file
except ImportError:
    print('safetensors: not installed')
else:
    loaded = load_file(sys.argv[1])
    print('safetensors:', sorted(loaded))
)");
  CommandResult r =
      run_command("/usr/bin/python3 " + quote(script.string()) + " " + quote(file().string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, StartsWith("__bytes__.blob U8 [2] [104, 105]\n"
                                   "h BF16 [2] [1.0, -3.0]\n"
                                   "m BOOL [3] [True, False, True]\n"
                                   "n I64 [] [-5]\n"
                                   "w F32 [2, 2] [1.0, 2.0, 3.0, 4.5]\n"));
  EXPECT_THAT(r.output, ::testing::AnyOf(HasSubstr("safetensors: not installed"),
                                         HasSubstr("safetensors: ['__bytes__.blob', 'h', 'm', "
                                                   "'n', 'w']")));
}

TEST_F(SafetensorsTest, ReadsFilesOfOtherWriters) {
  // No metadata, no checksums, JSON with spaces, tensors not in data order.
  const std::string header =
      "{ \"b\": {\"dtype\": \"I8\", \"shape\": [2], \"data_offsets\": [4, 6]},\n"
      "  \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]} }  ";
  write_bytes(file(), file_of(header, std::string("\x00\x00\x80\x3f\x01\xff", 6)));
  rh_StateDict loaded;
  ASSERT_EQ(load(loaded).message, "");
  EXPECT_EQ(tensor(loaded, "a"), "2/32 [1] 0000803f");
  EXPECT_EQ(tensor(loaded, "b"), "0/8 [2] 01ff");
  EXPECT_EQ(verify().message, "");
  // An empty file (no tensors) is valid too.
  write_bytes(file(), file_of("{}      ", ""));
  rh_StateDict empty;
  EXPECT_EQ(load(empty).message, "");
  EXPECT_EQ(api()->StateDict_Size(&empty), 0u);
}

// ---- Damage ---------------------------------------------------------------------

TEST_F(SafetensorsTest, AFlippedDataByteIsAChecksumErrorNamingTheTensor) {
  save_small_model();
  std::string raw = read_bytes(file());
  raw[data_offset_of("b") + 9] ^= 0x01;
  write_bytes(file(), raw);
  rh_StateDict dict;
  Result r = load(dict);
  EXPECT_EQ(r.code, RH_ERROR_DATA_LOSS);
  EXPECT_THAT(r.message, StartsWith(file().string() + ": checksum mismatch in tensor 'b': "
                                                      "stored crc32 "));
  EXPECT_THAT(r.message, HasSubstr("(the data is corrupted)"));
  Result v = verify();
  EXPECT_EQ(v.code, RH_ERROR_DATA_LOSS);
  EXPECT_EQ(v.message, r.message);
}

std::vector<std::string> names_in(const fs::path& dir);  // below

// ABI 1.7: the CRC-32 of each tensor, computed while it was written, goes
// to the host with StateDict_SetChecksum, and equals the file's own.
TEST_F(SafetensorsTest, SaveHandsTheChecksumsItWroteToTheHost) {
  rh_StateDict dict;
  put<float>(dict, "a", {kDLFloat, 32, 1}, {2, 2}, {1, 2, 3, 4});
  put<int64_t>(dict, "b", {kDLInt, 64, 1}, {3}, {7, 8, 9});
  put_bytes(dict, "c", "xyz");
  ASSERT_EQ(save(dict).message, "");
  const rh_StateDict::Entry& a = dict.entries.at("a");
  const rh_StateDict::Entry& b = dict.entries.at("b");
  ASSERT_TRUE(a.crc32.has_value());
  ASSERT_TRUE(b.crc32.has_value());
  EXPECT_EQ(*a.crc32, rh::crc32_update(0, a.data(), a.size()));
  EXPECT_EQ(*b.crc32, rh::crc32_update(0, b.data(), b.size()));
  EXPECT_FALSE(dict.entries.at("c").crc32.has_value());  // a blob: not in meta.json
  const std::string raw = read_bytes(file());
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", *a.crc32);
  EXPECT_THAT(raw, HasSubstr(std::string("\"crc32:a\":\"") + hex + "\""));

  // checksum: false computes none and reports none.
  auto plain = host_.create_checkpoint_io("{type: safetensors, checksum: false}");
  rh_StateDict other;
  put<float>(other, "a", {kDLFloat, 32, 1}, {1}, {5});
  ASSERT_EQ(
      call(*plain, &host::CheckpointIoInstance::save, &other, "plain", dir().string()).message, "");
  EXPECT_FALSE(other.entries.at("a").crc32.has_value());
}

// Large tensors: the checksums are computed on a second thread while the
// data is written; the file is the same as one checksummed inline.
TEST_F(SafetensorsTest, LargeTensorsAreChecksummedBesideTheWrite) {
  std::vector<float> big(3 << 20);  // 12 MiB, over the thread threshold
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1009) * 0.5f;
  std::vector<float> small = {1, 2, 3};
  rh_StateDict dict;
  put<float>(dict, "big", {kDLFloat, 32, 1}, {static_cast<int64_t>(big.size())}, big);
  put<float>(dict, "small", {kDLFloat, 32, 1}, {3}, small);
  ASSERT_EQ(save(dict).message, "");
  EXPECT_EQ(*dict.entries.at("big").crc32,
            rh::crc32_update(0, big.data(), big.size() * sizeof(float)));
  EXPECT_EQ(verify().message, "");
  rh_StateDict loaded;
  ASSERT_EQ(load(loaded).message, "");
  const rh_StateDict::Entry& e = loaded.entries.at("big");
  ASSERT_EQ(e.size(), big.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(e.data(), big.data(), e.size()), 0);
}

// ABI 1.7: Load reads a tensor straight into the memory the host placed it
// at (a model parameter), with no copy through a buffer of the plugin's.
TEST_F(SafetensorsTest, LoadReadsStraightIntoThePlaceTheHostGives) {
  save_small_model();
  std::vector<float> param(4, 0.0f);
  rh_StateDict dict;
  dict.destinations["a"] = {param.data(), {kDLFloat, 32, 1}, {2, 2}};
  ASSERT_EQ(load(dict).message, "");
  EXPECT_EQ(param, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(dict.entries.at("a").data(), reinterpret_cast<const uint8_t*>(param.data()));
  EXPECT_EQ(tensor(dict, "b"), "0/64 [3] 070000000000000008000000000000000900000000000000");
  EXPECT_EQ(bytes(dict, "c"), "xyz");
}

// A resume verifies the checkpoint, then loads it: the checksums are not
// computed twice, unless the file changed in between.
TEST_F(SafetensorsTest, AFileChangedAfterVerifyIsCheckedAgainAtLoad) {
  save_small_model();
  ASSERT_EQ(verify().message, "");
  std::string raw = read_bytes(file());
  raw[data_offset_of("a") + 2] ^= 0x10;
  write_bytes(file(), raw);
  rh_StateDict dict;
  Result r = load(dict);
  EXPECT_EQ(r.code, RH_ERROR_DATA_LOSS);
  EXPECT_THAT(r.message, HasSubstr("checksum mismatch in tensor 'a'"));
}

// Verify shares a large file between two threads; the damaged tensor
// reported is the file's first, whichever thread read it.
TEST_F(SafetensorsTest, VerifyOnTwoThreadsReportsTheFirstDamagedTensor) {
  std::vector<float> values(1 << 20, 1.5f);  // 4 MiB each
  rh_StateDict dict;
  for (const char* name : {"t0", "t1", "t2", "t3"})
    put<float>(dict, name, {kDLFloat, 32, 1}, {static_cast<int64_t>(values.size())}, values);
  ASSERT_EQ(save(dict).message, "");
  ASSERT_EQ(verify().message, "");
  const std::string good = read_bytes(file());
  std::string raw = good;
  raw[data_offset_of("t3") + 100] ^= 0x01;  // read by the second thread
  write_bytes(file(), raw);
  EXPECT_THAT(verify().message, HasSubstr("checksum mismatch in tensor 't3'"));
  raw[data_offset_of("t0") + 100] ^= 0x01;  // and by the first
  write_bytes(file(), raw);
  EXPECT_THAT(verify().message, HasSubstr("checksum mismatch in tensor 't0'"));
  write_bytes(file(), good);
  EXPECT_EQ(verify().message, "");
}

// The file is complete under its name once Save returns; Flush makes it
// durable (fsync of the file, then of the directory) and can be called
// with nothing to do.
TEST_F(SafetensorsTest, ASavedFileIsCompleteBeforeFlushAndFlushCanRepeat) {
  rh_StateDict dict;
  put<float>(dict, "a", {kDLFloat, 32, 1}, {2}, {1, 2});
  ASSERT_EQ(call(*io_, &host::CheckpointIoInstance::save, &dict, "model", dir().string()).message,
            "");
  EXPECT_EQ(names_in(dir()), (std::vector<std::string>{"model.safetensors"}));
  rh_StateDict loaded;
  ASSERT_EQ(load(loaded).message, "");
  EXPECT_EQ(tensor(loaded, "a"), "2/32 [2] 0000803f00000040");
  EXPECT_EQ(take(io_->flush()).message, "");
  EXPECT_EQ(take(io_->flush()).message, "");
}

TEST_F(SafetensorsTest, AFlippedBlobByteIsDetected) {
  save_small_model();
  std::string raw = read_bytes(file());
  raw[data_offset_of("__bytes__.c")] ^= 0x20;
  write_bytes(file(), raw);
  EXPECT_THAT(verify().message, HasSubstr("checksum mismatch in tensor '__bytes__.c'"));
}

TEST_F(SafetensorsTest, ATruncatedFileIsDetected) {
  save_small_model();
  const std::string raw = read_bytes(file());
  write_bytes(file(), raw.substr(0, raw.size() - 2));
  expect_damage("file is truncated: it has " + std::to_string(raw.size() - 2) +
                " bytes, but its header describes " + std::to_string(raw.size()) +
                " (tensor '__bytes__.c' has data_offsets [40, 43), out of range of the 41-byte "
                "data section)");
}

TEST_F(SafetensorsTest, TrailingBytesAreDetected) {
  save_small_model();
  const std::string raw = read_bytes(file());
  write_bytes(file(), raw + "junk");
  expect_damage("file has 4 bytes after the last tensor: it has " + std::to_string(raw.size() + 4) +
                " bytes, but its header describes " + std::to_string(raw.size()) +
                " (data section not covered by the tensors)");
}

TEST_F(SafetensorsTest, AFileShorterThanTheLengthFieldIsDetected) {
  write_bytes(file(), std::string("\x10\0\0", 3));
  expect_damage("file is 3 bytes, shorter than the 8-byte header length (truncated)");
  write_bytes(file(), "");
  expect_damage("file is 0 bytes, shorter than the 8-byte header length (truncated)");
}

TEST_F(SafetensorsTest, AHeaderLengthBeyondTheFileIsDetected) {
  save_small_model();
  std::string raw = read_bytes(file());
  raw.replace(0, 8, u64le(uint64_t{1} << 40));
  write_bytes(file(), raw);
  expect_damage("header length 1099511627776 goes beyond the end of the file (" +
                std::to_string(raw.size()) + " bytes): corrupted or truncated");
}

TEST_F(SafetensorsTest, AHeaderLengthBeyondTheLimitIsRefused) {
  // A sparse file just larger than the limit: no 100 MB written.
  const uint64_t n = 100'000'008;
  write_bytes(file(), u64le(n));
  fs::resize_file(file(), 8 + n);
  expect_damage("header length 100000008 exceeds the limit of 100000000 bytes");
}

TEST_F(SafetensorsTest, InvalidJsonIsDetected) {
  struct Case {
    std::string header;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"{\"a\": }", "invalid JSON header: at byte 6: expected a JSON value, got '}'"},
      {"{\"a\": {\"dtype\": \"F32\",}}",
       "invalid JSON header: at byte 22: trailing comma before '}' is not JSON"},
      {"{\"a\": 1} x", "invalid JSON header: at byte 9: unexpected 'x' after the JSON value"},
      {"{\"a\": 1, \"a\": 2}",
       "invalid JSON header: at byte 9: duplicate key 'a' (first at line 1)"},
      {"{\"a\": \"\xff\"}",
       "invalid JSON header: at byte 7: invalid UTF-8 byte 0xff in a "
       "string"},
      {"{\"a\": 01}", "invalid JSON header: at byte 7: leading zeros are not JSON"},
      {"{\"a\": NaN}", "invalid JSON header: at byte 6: NaN and Infinity are not JSON numbers"},
      {"{\"a\": \"x", "invalid JSON header: at byte 6: unterminated string (missing '\"')"},
      {std::string("{\"a\": 1}\0\0\0", 11),
       "invalid JSON header: at byte 8: unexpected byte "
       "0x00 after the JSON value"},
      {" {}", "invalid JSON header: it does not start with '{'"},
      {"[]", "invalid JSON header: it does not start with '{'"},
      {std::string(70, '[') + std::string(70, ']'),
       "invalid JSON header: it does not start with '{'"},
      {"{\"a\":" + std::string(70, '[') + std::string(70, ']') + "}",
       "invalid JSON header: at byte 68: nesting deeper than 64 levels"},
  };
  for (const Case& c : cases) {
    write_bytes(file(), file_of(c.header, ""));
    SCOPED_TRACE(c.header);
    expect_damage(c.message);
  }
}

TEST_F(SafetensorsTest, BadTensorEntriesAreDetected) {
  struct Case {
    std::string header;
    std::string data;
    std::string message;
    rh_ErrorCode code = RH_ERROR_DATA_LOSS;
  };
  const std::string f32 = "\"dtype\": \"F32\", \"shape\": [2]";
  const std::vector<Case> cases = {
      {"{\"w\": {" + f32 + ", \"data_offsets\": [8, 0]}}", std::string(8, '\0'),
       "tensor 'w': data_offsets [8, 0] are out of range: the end lies before the begin"},
      {"{\"w\": {" + f32 + ", \"data_offsets\": [0, 12]}}", std::string(12, '\0'),
       "tensor 'w': data_offsets [0, 12) hold 12 bytes, but F32 [2] needs 8"},
      {"{\"w\": {" + f32 + ", \"data_offsets\": [0, 8]}, \"v\": {" + f32 +
           ", \"data_offsets\": [4, 12]}}",
       std::string(12, '\0'), "tensors 'w' [0, 8) and 'v' [4, 12) overlap in the data section"},
      {"{\"w\": {" + f32 + ", \"data_offsets\": [4, 12]}}", std::string(12, '\0'),
       "bytes [0, 4) of the data section belong to no tensor (before tensor 'w')"},
      {"{\"w\": {" + f32 + ", \"data_offsets\": [0, 8], \"extra\": 1}}", std::string(8, '\0'),
       "tensor 'w': unexpected key \"extra\" (expected dtype, shape, data_offsets)"},
      {"{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 8]}}", std::string(8, '\0'),
       "tensor 'w': missing shape"},
      {"{\"w\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}",
       std::string(8, '\0'), "tensor 'w': shape must hold non-negative integers"},
      {"{\"w\": {" + f32 + ", \"data_offsets\": [0]}}", std::string(8, '\0'),
       "tensor 'w': data_offsets must be two non-negative integers [begin, end]"},
      {"{\"w\": {\"dtype\": \"F8_E4M3\", \"shape\": [2], \"data_offsets\": [0, 2]}}",
       std::string(2, '\0'),
       "tensor 'w': dtype 'F8_E4M3' is not supported (supported: F64, F32, F16, BF16, I64, I32, "
       "I16, I8, U64, U32, U16, U8, BOOL)",
       RH_ERROR_UNIMPLEMENTED},
      {"{\"__metadata__\": {\"x\": 1}}", "", "__metadata__ entry \"x\" must be a string"},
      {"{\"__metadata__\": {\"checksum\": \"crc32\"}, \"w\": {" + f32 +
           ", \"data_offsets\": [0, 8]}}",
       std::string(8, '\0'), "no checksum for tensor 'w' in __metadata__"},
      {"{\"__metadata__\": {\"crc32:w\": \"XYZ\"}, \"w\": {" + f32 + ", \"data_offsets\": [0, 8]}}",
       std::string(8, '\0'), "checksum of tensor 'w' is 'XYZ', expected 8 lowercase hex digits"},
      {"{\"__metadata__\": {\"crc32:v\": \"00000000\"}, \"w\": {" + f32 +
           ", \"data_offsets\": [0, 8]}}",
       std::string(8, '\0'),
       "__metadata__ has a checksum for tensor 'v', which the header does not describe"},
      {"{\"__metadata__\": {\"checksum\": \"xxh64\"}}", "",
       "__metadata__ names checksum 'xxh64', only crc32 is known", RH_ERROR_UNIMPLEMENTED},
      {"{\"__bytes__.k\": {" + f32 + ", \"data_offsets\": [0, 8]}}", std::string(8, '\0'),
       "tensor '__bytes__.k' should hold bytes (U8, 1-D) but is F32 [2]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    std::string header = c.header;
    header.append((8 - header.size() % 8) % 8, ' ');
    write_bytes(file(), file_of(header, c.data));
    rh_StateDict dict;
    Result l = load(dict);
    EXPECT_EQ(l.code, c.code);
    EXPECT_EQ(l.message, file().string() + ": " + c.message);
  }
}

TEST_F(SafetensorsTest, AMissingFileIsNotFound) {
  rh_StateDict dict;
  Result r = load(dict, "absent");
  EXPECT_EQ(r.code, RH_ERROR_NOT_FOUND);
  EXPECT_EQ(r.message, file("absent").string() + ": cannot open: No such file or directory");
  EXPECT_EQ(verify("absent").code, RH_ERROR_NOT_FOUND);
}

TEST_F(SafetensorsTest, FilesWithoutChecksumsPassTheStructuralChecks) {
  auto plain = host_.create_checkpoint_io("{type: safetensors, checksum: false}");
  rh_StateDict dict;
  put<float>(dict, "w", {kDLFloat, 32, 1}, {2}, {1, 2});
  ASSERT_EQ(call(*plain, &host::CheckpointIoInstance::save, &dict, "model", dir().string()).message,
            "");
  EXPECT_THAT(read_bytes(file()), ::testing::Not(HasSubstr("crc32")));
  EXPECT_EQ(verify().message, "");
  rh_StateDict loaded;
  EXPECT_EQ(load(loaded).message, "");
  // Truncation is still found.
  const std::string raw = read_bytes(file());
  write_bytes(file(), raw.substr(0, raw.size() - 1));
  EXPECT_THAT(verify().message, HasSubstr("file is truncated"));
}

// ---- Atomic write -------------------------------------------------------------

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(SafetensorsTest, SaveLeavesOnlyTheFinalFile) {
  save_small_model();
  save_small_model();  // replacing an existing file
  EXPECT_EQ(names_in(dir()), (std::vector<std::string>{"model.safetensors"}));
}

TEST_F(SafetensorsTest, AFailedSaveKeepsTheOldFile) {
  save_small_model();
  const std::string good = read_bytes(file());
  rh_StateDict other;
  put<float>(other, "other", {kDLFloat, 32, 1}, {1}, {5});

  // The temporary cannot be created (a directory is in its way).
  fs::create_directory(dir() / "model.safetensors.tmp");
  Result r = save(other);
  EXPECT_EQ(r.code, RH_ERROR_IO);
  EXPECT_EQ(r.message,
            (dir() / "model.safetensors.tmp").string() + ": cannot create: Is a directory");
  EXPECT_EQ(read_bytes(file()), good);
  fs::remove(dir() / "model.safetensors.tmp");

  // The disk fills up in the middle of the data (a file size limit).
  std::vector<float> big(64 * 1024, 1.0f);
  put<float>(other, "big", {kDLFloat, 32, 1}, {static_cast<int64_t>(big.size())}, big);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  r = save(other);
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(r.code, RH_ERROR_IO);
  EXPECT_EQ(r.message,
            (dir() / "model.safetensors.tmp").string() + ": write failed: File too large");
  EXPECT_EQ(names_in(dir()), (std::vector<std::string>{"model.safetensors"}));
  EXPECT_EQ(read_bytes(file()), good);
  rh_StateDict loaded;
  EXPECT_EQ(load(loaded).message, "");
  EXPECT_EQ(bytes(loaded, "c"), "xyz");
}

TEST_F(SafetensorsTest, AReadOnlyDirectoryIsAnErrorAndKeepsTheOldFile) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  save_small_model();
  const std::string good = read_bytes(file());
  fs::permissions(dir(), fs::perms::owner_read | fs::perms::owner_exec);
  rh_StateDict other;
  put<float>(other, "other", {kDLFloat, 32, 1}, {1}, {5});
  Result r = save(other);
  fs::permissions(dir(), fs::perms::owner_all);
  EXPECT_EQ(r.code, RH_ERROR_IO);
  EXPECT_THAT(r.message, HasSubstr("model.safetensors.tmp: cannot create: Permission denied"));
  EXPECT_EQ(read_bytes(file()), good);
}

TEST_F(SafetensorsTest, SaveRefusesWhatItCannotWriteAndWritesNothing) {
  struct Case {
    std::string stem;
    std::string key;
    DLDataType dtype;
    rh_ErrorCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"../evil",
       "w",
       {kDLFloat, 32, 1},
       RH_ERROR_INVALID_ARGUMENT,
       "safetensors: stem '../evil' is not a plain file name (it must not contain '/')"},
      {"",
       "w",
       {kDLFloat, 32, 1},
       RH_ERROR_INVALID_ARGUMENT,
       "safetensors: stem '' is not a plain file name (it must not contain '/')"},
      {"model",
       "c",
       {kDLComplex, 64, 1},
       RH_ERROR_UNIMPLEMENTED,
       "safetensors: tensor 'c' has DLPack dtype code 5 bits 64 lanes 1, which safetensors "
       "cannot store (supported: F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, "
       "BOOL)"},
      {"model",
       "v",
       {kDLFloat, 32, 4},
       RH_ERROR_UNIMPLEMENTED,
       "safetensors: tensor 'v' has DLPack dtype code 2 bits 32 lanes 4, which safetensors "
       "cannot store (supported: F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, "
       "BOOL)"},
      {"model",
       "__metadata__",
       {kDLFloat, 32, 1},
       RH_ERROR_INVALID_ARGUMENT,
       "safetensors: a tensor cannot be named '__metadata__' (reserved by the format)"},
      {"model",
       "__bytes__.x",
       {kDLFloat, 32, 1},
       RH_ERROR_INVALID_ARGUMENT,
       "safetensors: tensor '__bytes__.x' uses the prefix '__bytes__.' reserved for byte "
       "blobs"},
      {"model",
       "bad\xff",
       {kDLFloat, 32, 1},
       RH_ERROR_INVALID_ARGUMENT,
       "safetensors: state dict key 'bad\xff' is not valid UTF-8"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    rh_StateDict dict;
    put<float>(dict, c.key, c.dtype, {2}, {1, 2, 3, 4, 5, 6, 7, 8});
    Result r = save(dict, c.stem);
    EXPECT_EQ(r.code, c.code);
    EXPECT_EQ(r.message, c.message);
    EXPECT_TRUE(fs::is_empty(dir()));
  }
  rh_StateDict dict;
  Result r =
      call(*io_, &host::CheckpointIoInstance::save, &dict, "model", (dir() / "absent").string());
  EXPECT_EQ(r.code, RH_ERROR_NOT_FOUND);
  EXPECT_EQ(r.message, (dir() / "absent/model.safetensors.tmp").string() +
                           ": cannot create: No such file or directory");
}

// ---- Limits ---------------------------------------------------------------------

TEST_F(SafetensorsTest, SaveRefusesAHeaderOverTheReadersLimit) {
  // One empty tensor with a 50 MB name: the name is in the header twice (the
  // tensor and its checksum entry), so the header passes 100 MB while the
  // data is 0 bytes.
  rh_StateDict dict;
  put<float>(dict, std::string(50'000'001, 'n'), {kDLFloat, 32, 1}, {0}, {});
  Result r = save(dict);
  EXPECT_EQ(r.code, RH_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(r.message, StartsWith("safetensors: " + file().string() + ": the header would be "));
  EXPECT_THAT(r.message, HasSubstr(" bytes, over the limit of 100000000 bytes that safetensors "
                                   "readers enforce (1 tensors; too many or too long names)"));
  EXPECT_TRUE(fs::is_empty(dir()));
}

// Entries the host's StateDict_PutTensor now refuses, planted directly: the
// plugin checks what it is handed, whatever the host.
TEST_F(SafetensorsTest, SaveRefusesShapesWhoseSizeOverflows) {
  struct Case {
    std::vector<int64_t> shape;
    DLDataType dtype;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{int64_t{1} << 62, 8},
       {kDLFloat, 32, 1},
       "safetensors: tensor 'w' has shape F32 [4611686018427387904, 8]..., whose element count "
       "overflows"},
      {{int64_t{1} << 61},
       {kDLFloat, 64, 1},
       "safetensors: tensor 'w' F64 [2305843009213693952] is too large: its size in bytes "
       "overflows"},
      {std::vector<int64_t>(65, 1),
       {kDLFloat, 32, 1},
       "safetensors: tensor 'w' has 65 dimensions (0..64 can be written)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    rh_StateDict dict;
    rh_StateDict::Entry& e = dict.entries["w"];
    e.is_tensor = true;
    e.dtype = c.dtype;
    e.shape = c.shape;
    e.bytes.resize(16);
    Result r = save(dict);
    EXPECT_EQ(r.code, RH_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(r.message, c.message);
    EXPECT_TRUE(fs::is_empty(dir()));
  }
}

TEST_F(SafetensorsTest, ReadRefusesMoreThan64Dimensions) {
  auto header_with_dims = [](size_t n) {
    std::string shape;
    for (size_t i = 0; i < n; ++i) shape += (i ? "," : "") + std::string("1");
    std::string h =
        "{\"w\": {\"dtype\": \"F32\", \"shape\": [" + shape + "], \"data_offsets\": [0, 4]}}";
    h.append((8 - h.size() % 8) % 8, ' ');
    return h;
  };
  write_bytes(file(), file_of(header_with_dims(64), std::string(4, '\0')));
  rh_StateDict dict;
  EXPECT_EQ(load(dict).message, "");
  write_bytes(file(), file_of(header_with_dims(65), std::string(4, '\0')));
  expect_damage("tensor 'w': shape has 65 dimensions, more than the 64 this reader accepts");
}

}  // namespace
}  // namespace rh::test

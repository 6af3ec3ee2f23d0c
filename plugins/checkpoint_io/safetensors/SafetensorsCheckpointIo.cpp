// Checkpoint IO `safetensors`, the default backend: each state dict becomes
// one file `<dir>/<stem>.safetensors` in the safetensors format, readable by
// Python's safetensors (`safetensors.torch.load_file`) and HF tools.
//
// Config:
//   checkpoint_io:
//     type: safetensors
//     checksum: true   # write a CRC-32 per tensor into __metadata__
//
// State dict -> file (layout: SafetensorsHeader.hpp):
//   tensor "w"  -> tensor "w", same dtype and shape, C order (strided inputs
//                  are gathered); dtypes F64 F32 F16 BF16 I64 I32 I16 I8 U64
//                  U32 U16 U8 BOOL (DLPack code 6, kDLBool)
//   bytes "k"   -> U8 1-D tensor "__bytes__.k"; Load turns it back into bytes
//                  (so blobs of any size are checksummed like tensors)
//   __metadata__: "format": "pt", "checksum": "crc32", "crc32:<tensor>": "<hex>"
// Tensors are written largest element size first, then by name, so every
// tensor is aligned to its element size in the file (8 + N is a multiple of 8).
//
// Save writes `<stem>.safetensors.tmp` and renames it over
// `<stem>.safetensors` once it is complete: a reader sees the old file or
// the new one, never a torn one; on failure the temporary is removed and an
// existing file is left as it was. Flush makes every file saved since the
// last Flush durable (fsync of each file, then of each directory once), so
// the disk writes one file while the next is being written; the host calls
// it before it publishes a checkpoint. The CRC-32 of each tensor is computed
// on a second thread while the data is written (the header goes first with
// placeholder checksums, all 8 hex digits, and is rewritten in place at the
// end), and the checksums go to the host too (StateDict_SetChecksum, ABI
// 1.7), which records them in meta.json instead of reading the tensors
// again.
//
// Load reads each tensor straight into memory the host gives it
// (StateDict_AllocTensor, ABI 1.7: a model parameter when the host places
// it there), else through a buffer and StateDict_PutTensor.
//
// Load and Verify check the whole file before trusting it: the header length,
// strict JSON, dtypes and shapes against data_offsets, that the tensors tile
// the data section, that the file size is exactly what the header describes
// (truncation), and every checksum the file carries (files written by other
// tools have none and load with the structural checks only). Each problem is
// an RH_ERROR_DATA_LOSS error that names the file and, where it applies, the
// tensor. A file this instance has verified and that has not changed since
// (same device, inode, size, mtime and ctime) is loaded without checking
// its checksums a second time: a resume verifies the checkpoint it picks,
// then loads it.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "formats/Json.hpp"
#include "formats/PosixFile.hpp"
#include "formats/SafetensorsHeader.hpp"
#include "rh/cpp/crc32.hpp"
#include "rh/cpp/plugin.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little endian and this plugin writes host memory as it is");

namespace {

using rh::posix::PosixFile;
using rh::safetensors::Dtype;
using rh::safetensors::Header;
using rh::safetensors::TensorEntry;

constexpr std::string_view kBytesPrefix = "__bytes__.";
constexpr size_t kVerifyChunk = size_t{8} << 20;
// Save: written in blocks this size (one write(2) each).
constexpr size_t kWriteBlock = size_t{1} << 20;
// Below this many bytes a save checksums on its own thread: a second
// thread costs more than it hides.
constexpr uint64_t kChecksumThreadBytes = uint64_t{4} << 20;

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// "'name'" for messages, with control characters escaped.
std::string quoted(std::string_view name) {
  std::string json;
  rh::json::append_string(json, name);
  return "'" + json.substr(1, json.size() - 2) + "'";
}

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// The file of a stem, after checking the stem cannot leave the directory.
struct FilePaths {
  std::string dir;
  std::string file;  // <dir>/<stem>.safetensors
  std::string tmp;   // <file>.tmp
};

FilePaths file_paths(const rh_CheckpointFileArgs& args) {
  const std::string dir = rh::to_string(args.dir);
  const std::string stem = rh::to_string(args.stem);
  if (dir.empty()) throw rh::Exception(RH_ERROR_INVALID_ARGUMENT, "safetensors: empty directory");
  if (stem.empty() || stem == "." || stem == ".." || stem.find('/') != std::string::npos ||
      stem.find('\0') != std::string::npos) {
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "safetensors: stem " + quoted(stem) +
                            " is not a plain file name (it must not contain '/')");
  }
  FilePaths p;
  p.dir = dir;
  p.file = dir + (dir.back() == '/' ? "" : "/") + stem + ".safetensors";
  p.tmp = p.file + ".tmp";
  return p;
}

// ---- Save ------------------------------------------------------------------

// One tensor to write: its entry and its bytes in C order (borrowed from the
// state dict, or gathered from a strided view).
struct Source {
  TensorEntry entry;
  std::string key;  // in the state dict ("" for a byte blob)
  const unsigned char* data = nullptr;
  std::vector<unsigned char> gathered;
};

bool is_c_contiguous(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expected = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

void gather(const unsigned char* src, const int64_t* shape, const int64_t* strides, int ndim,
            size_t elem, unsigned char*& dst) {
  if (ndim == 0) {
    std::memcpy(dst, src, elem);
    dst += elem;
    return;
  }
  const int64_t step = strides[0] * static_cast<int64_t>(elem);
  for (int64_t i = 0; i < shape[0]; ++i)
    gather(src + i * step, shape + 1, strides + 1, ndim - 1, elem, dst);
}

void check_key(const std::string& key) {
  if (!rh::json::is_valid_utf8(key)) {
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "safetensors: state dict key " + quoted(key) + " is not valid UTF-8");
  }
  if (key == "__metadata__") {
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "safetensors: a tensor cannot be named '__metadata__' (reserved by the "
                        "format)");
  }
}

Source tensor_source(const std::string& key, const DLManagedTensor& managed) {
  check_key(key);
  if (starts_with(key, kBytesPrefix)) {
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "safetensors: tensor " + quoted(key) + " uses the prefix '" +
                            std::string(kBytesPrefix) + "' reserved for byte blobs");
  }
  const DLTensor& t = managed.dl_tensor;
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    throw rh::Exception(RH_ERROR_UNIMPLEMENTED, "safetensors: tensor " + quoted(key) +
                                                    " is on DLPack device type " +
                                                    std::to_string(t.device.device_type) +
                                                    "; only host-memory tensors can be written");
  }
  const Dtype* dtype = rh::safetensors::dtype_of(t.dtype);
  if (dtype == nullptr) {
    throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                        "safetensors: tensor " + quoted(key) + " has DLPack dtype code " +
                            std::to_string(t.dtype.code) + " bits " + std::to_string(t.dtype.bits) +
                            " lanes " + std::to_string(t.dtype.lanes) +
                            ", which safetensors cannot store (supported: " +
                            rh::safetensors::supported_dtypes() + ")");
  }
  Source s;
  s.entry.name = key;
  s.key = key;
  s.entry.dtype = dtype;
  // The host checks tensors put through the ABI; this plugin checks again so
  // that a bad description from any host is an error, never a short read.
  if (t.ndim < 0 || t.ndim > rh::safetensors::kMaxDims) {
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT, "safetensors: tensor " + quoted(key) + " has " +
                                                       std::to_string(t.ndim) + " dimensions (0.." +
                                                       std::to_string(rh::safetensors::kMaxDims) +
                                                       " can be written)");
  }
  if (t.ndim > 0 && t.shape == nullptr)
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "safetensors: tensor " + quoted(key) + " has no shape");
  uint64_t numel = 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                          "safetensors: tensor " + quoted(key) + " has a negative dimension");
    s.entry.shape.push_back(static_cast<uint64_t>(t.shape[i]));
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(t.shape[i]), &numel))
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                          "safetensors: tensor " + quoted(key) + " has shape " +
                              rh::safetensors::describe(*dtype, s.entry.shape) +
                              "..., whose element count overflows");
  }
  uint64_t size = 0;
  if (__builtin_mul_overflow(numel, dtype->bytes(), &size) ||
      size > static_cast<uint64_t>(PTRDIFF_MAX))
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "safetensors: tensor " + quoted(key) + " " +
                            rh::safetensors::describe(*dtype, s.entry.shape) +
                            " is too large: its size in bytes overflows");
  if (size > 0 && t.data == nullptr)
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "safetensors: tensor " + quoted(key) + " has no data");
  s.entry.end = size;  // begin/end are placed later; end - begin is the size
  const auto* base = static_cast<const unsigned char*>(t.data) + t.byte_offset;
  if (size == 0) return s;
  if (is_c_contiguous(t)) {
    s.data = base;
  } else {
    s.gathered.resize(size);
    unsigned char* dst = s.gathered.data();
    gather(base, t.shape, t.strides, t.ndim, dtype->bytes(), dst);
    s.data = s.gathered.data();
  }
  return s;
}

Source bytes_source(const std::string& key, rh_StringView bytes) {
  check_key(key);
  Source s;
  s.entry.name = std::string(kBytesPrefix) + key;
  s.entry.dtype = rh::safetensors::dtype_by_name("U8");
  s.entry.shape = {bytes.size};
  s.entry.end = bytes.size;
  s.data = reinterpret_cast<const unsigned char*>(bytes.data);
  return s;
}

// ---- Load / Verify ---------------------------------------------------------

// A file whose header has been read and checked.
struct OpenedFile {
  PosixFile file;
  Header header;
  uint64_t data_start = 0;  // 8 + N
};

[[noreturn]] void data_loss(const std::string& path, const std::string& message) {
  throw rh::Exception(RH_ERROR_DATA_LOSS, path + ": " + message);
}

OpenedFile open_checked(const std::string& path) {
  PosixFile file = PosixFile::open_read(path);
  const uint64_t size = file.size();
  if (size < 8) {
    data_loss(path, "file is " + std::to_string(size) +
                        " bytes, shorter than the 8-byte header length (truncated)");
  }
  unsigned char prefix[8];
  file.read_at(0, prefix, 8);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | prefix[i];
  if (header_size > size - 8) {
    data_loss(path, "header length " + std::to_string(header_size) +
                        " goes beyond the end of the file (" + std::to_string(size) +
                        " bytes): corrupted or truncated");
  }
  if (header_size > rh::safetensors::kMaxHeaderSize) {
    data_loss(path, "header length " + std::to_string(header_size) + " exceeds the limit of " +
                        std::to_string(rh::safetensors::kMaxHeaderSize) + " bytes");
  }
  std::string json(header_size, '\0');
  file.read_at(8, json.data(), json.size());
  OpenedFile opened{std::move(file), Header{}, 8 + header_size};
  try {
    opened.header = rh::safetensors::decode_header(json, size);
  } catch (const rh::Exception& e) {
    throw rh::Exception(e.code(), path + ": " + e.what());
  }
  return opened;
}

void check_crc(const std::string& path, const TensorEntry& t, uint32_t computed) {
  if (t.crc32 && *t.crc32 != computed) {
    data_loss(path, "checksum mismatch in tensor " + quoted(t.name) + ": stored crc32 " +
                        hex8(*t.crc32) + ", computed " + hex8(computed) +
                        " (the data is corrupted)");
  }
}

class SafetensorsCheckpointIo {
 public:
  explicit SafetensorsCheckpointIo(const rh_CreateArgs& args) : host_(args.host) {
    rh::Config cfg(args.host, args.config);
    checksum_ = cfg.get<bool>("checksum", true);
  }

  void save(const rh_CheckpointFileArgs& args) {
    const FilePaths paths = file_paths(args);
    if (args.dict == nullptr)
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT, "safetensors Save: no state dict");
    std::vector<Source> sources = collect(args.dict);

    // Largest elements first (alignment), then by name (a stable file).
    std::sort(sources.begin(), sources.end(), [](const Source& a, const Source& b) {
      if (a.entry.dtype->bytes() != b.entry.dtype->bytes())
        return a.entry.dtype->bytes() > b.entry.dtype->bytes();
      return a.entry.name < b.entry.name;
    });
    Header header;
    header.metadata = {{"format", "pt"}};
    uint64_t offset = 0;
    for (Source& s : sources) {
      const uint64_t size = s.entry.end;
      s.entry.begin = offset;
      if (__builtin_add_overflow(offset, size, &s.entry.end))
        throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                            "safetensors: " + paths.file + ": the tensors' total size overflows");
      offset = s.entry.end;
      if (checksum_) s.entry.crc32 = 0;  // computed while writing (write_file)
      header.tensors.push_back(s.entry);
    }
    // A header that no reader (ours or Hugging Face's) would accept is
    // refused before anything is written.
    const std::string encoded = rh::safetensors::encode_header(header);
    if (encoded.size() > rh::safetensors::kMaxHeaderSize) {
      throw rh::Exception(
          RH_ERROR_INVALID_ARGUMENT,
          "safetensors: " + paths.file + ": the header would be " + std::to_string(encoded.size()) +
              " bytes, over the limit of " + std::to_string(rh::safetensors::kMaxHeaderSize) +
              " bytes that safetensors readers enforce (" + std::to_string(header.tensors.size()) +
              " tensors; too many or too long names)");
    }
    write_file(paths, header, encoded, sources);
    // The host records the same checksums in meta.json (not bytes blobs:
    // meta.json lists tensors only).
    if (checksum_ && RH_STRUCT_HAS(host_, rh_HostApi, StateDict_SetChecksum) &&
        host_->StateDict_SetChecksum != nullptr)
      for (size_t i = 0; i < sources.size(); ++i)  // header.tensors[i] is sources[i]
        if (!sources[i].key.empty())
          rh::check(host_,
                    host_->StateDict_SetChecksum(args.dict, sources[i].key.data(),
                                                 sources[i].key.size(), *header.tensors[i].crc32));
  }

  // Every file saved since the last Flush, durable: each fsynced, then
  // each directory once (their renames). The first failure is reported
  // after every file was tried.
  void flush() {
    std::vector<Pending> files = std::move(pending_);
    pending_.clear();
    std::exception_ptr first;
    std::vector<std::string> dirs;
    for (Pending& p : files) {
      try {
        p.file.sync();
        p.file.close();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
      if (std::find(dirs.begin(), dirs.end(), p.dir) == dirs.end()) dirs.push_back(p.dir);
    }
    for (const std::string& dir : dirs) {
      try {
        rh::posix::sync_directory(dir);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  void load(const rh_CheckpointFileArgs& args) {
    const FilePaths paths = file_paths(args);
    if (args.dict == nullptr)
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT, "safetensors Load: no state dict to fill");
    OpenedFile f = open_checked(paths.file);
    const auto seen = verified_.find(paths.file);
    const bool checked = seen != verified_.end() && seen->second == f.file.identity();
    std::vector<unsigned char> buffer;  // blobs, and tensors when the host cannot place them
    std::vector<int64_t> shape;
    for (const TensorEntry& t : f.header.tensors) {
      if (starts_with(t.name, kBytesPrefix)) {
        if (t.dtype->name != "U8" || t.shape.size() != 1) {
          data_loss(paths.file, "tensor " + quoted(t.name) +
                                    " should hold bytes (U8, 1-D) but is " +
                                    rh::safetensors::describe(*t.dtype, t.shape));
        }
        buffer.resize(t.size());
        f.file.read_at(f.data_start + t.begin, buffer.data(), t.size());
        if (t.crc32 && !checked)
          check_crc(paths.file, t, rh::crc32_update(0, buffer.data(), t.size()));
        const std::string key = t.name.substr(kBytesPrefix.size());
        rh::check(host_, host_->StateDict_PutBytes(args.dict, key.data(), key.size(), buffer.data(),
                                                   t.size()));
        continue;
      }
      shape.clear();
      for (uint64_t d : t.shape) {
        if (d > static_cast<uint64_t>(INT64_MAX))
          data_loss(paths.file, "tensor " + quoted(t.name) + " has a dimension beyond int64");
        shape.push_back(static_cast<int64_t>(d));
      }
      read_tensor(
          args.dict, t.name, *t.dtype, shape,
          [&](unsigned char* data) {
            f.file.read_at(f.data_start + t.begin, data, t.size());
            if (t.crc32 && !checked) check_crc(paths.file, t, rh::crc32_update(0, data, t.size()));
          },
          buffer);
    }
  }

  // Only the requested ranges, each one pread (resharding reads the pieces
  // of other ranks' shards it needs; the whole checkpoint was verified when
  // it was chosen).
  void load_slices(const rh_CheckpointFileArgs& args, const rh_CheckpointSlice* slices, size_t n) {
    const FilePaths paths = file_paths(args);
    if (args.dict == nullptr)
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                          "safetensors LoadSlices: no state dict to fill");
    if (n > 0 && slices == nullptr)
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT, "safetensors LoadSlices: no slices");
    OpenedFile f = open_checked(paths.file);
    std::vector<unsigned char> buffer;
    for (size_t i = 0; i < n; ++i) {
      const rh_CheckpointSlice& s = slices[i];
      const std::string key = rh::to_string(s.key);
      const auto t = std::find_if(f.header.tensors.begin(), f.header.tensors.end(),
                                  [&](const TensorEntry& e) { return e.name == key; });
      if (t == f.header.tensors.end() || starts_with(key, kBytesPrefix))
        throw rh::Exception(RH_ERROR_NOT_FOUND,
                            paths.file + ": no tensor " + quoted(key) + " to read a slice of");
      const uint64_t elem = t->dtype->bytes();
      const uint64_t numel = elem == 0 ? 0 : t->size() / elem;
      if (s.offset < 0 || s.numel < 0 || static_cast<uint64_t>(s.offset) > numel ||
          static_cast<uint64_t>(s.numel) > numel - static_cast<uint64_t>(s.offset))
        throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                            paths.file + ": slice [" + std::to_string(s.offset) + ", +" +
                                std::to_string(s.numel) + ") is outside tensor " + quoted(key) +
                                " of " + std::to_string(numel) + " elements");
      const uint64_t at = f.data_start + t->begin + static_cast<uint64_t>(s.offset) * elem;
      const size_t size = static_cast<size_t>(s.numel) * elem;
      read_tensor(
          args.dict, key, *t->dtype, {s.numel},
          [&](unsigned char* data) { f.file.read_at(at, data, size); }, buffer);
    }
  }

  // Reads every checksummed tensor and checks its CRC-32: on two threads
  // when there is enough to share (each reads and checksums its own half of
  // the bytes; the file's first damaged tensor is the one reported).
  void verify(const rh_CheckpointFileArgs& args) {
    const FilePaths paths = file_paths(args);
    verified_.erase(paths.file);
    OpenedFile f = open_checked(paths.file);
    std::vector<const TensorEntry*> checked;
    uint64_t total = 0;
    for (const TensorEntry& t : f.header.tensors)
      if (t.crc32) {  // no checksum: the size checks are all there is
        checked.push_back(&t);
        total += t.size();
      }
    // Tensors [0, split) on this thread, [split, n) on the other.
    size_t split = checked.size();
    if (total >= kChecksumThreadBytes) {
      uint64_t first = 0;
      for (split = 0; split < checked.size() && first < total / 2; ++split)
        first += checked[split]->size();
    }
    std::vector<uint32_t> crcs(checked.size(), 0);
    auto compute = [&](size_t begin, size_t end) {
      std::vector<unsigned char> chunk;
      for (size_t i = begin; i < end; ++i) {
        const TensorEntry& t = *checked[i];
        chunk.resize(static_cast<size_t>(std::min<uint64_t>(kVerifyChunk, t.size())));
        for (uint64_t done = 0; done < t.size();) {
          const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), t.size() - done));
          f.file.read_at(f.data_start + t.begin + done, chunk.data(), n);
          crcs[i] = rh::crc32_update(crcs[i], chunk.data(), n);
          done += n;
        }
      }
    };
    std::exception_ptr second_error;
    std::thread second;
    if (split < checked.size())
      second = std::thread([&] {
        try {
          compute(split, checked.size());
        } catch (...) {
          second_error = std::current_exception();
        }
      });
    std::exception_ptr first_error;
    try {
      compute(0, split);
    } catch (...) {
      first_error = std::current_exception();
    }
    if (second.joinable()) second.join();
    if (first_error) std::rethrow_exception(first_error);
    for (size_t i = 0; i < split; ++i) check_crc(paths.file, *checked[i], crcs[i]);
    if (second_error) std::rethrow_exception(second_error);
    for (size_t i = split; i < checked.size(); ++i) check_crc(paths.file, *checked[i], crcs[i]);
    verified_[paths.file] = f.file.identity();
  }

 private:
  // Every entry of the dict as a Source (tensors and blobs).
  std::vector<Source> collect(rh_StateDict* dict) const {
    std::vector<Source> sources;
    const size_t n = host_->StateDict_Size(dict);
    sources.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const std::string key = rh::to_string(host_->StateDict_KeyAt(dict, i));
      const DLManagedTensor* tensor = nullptr;
      rh::ErrorPtr err(host_, host_->StateDict_GetTensor(dict, key.data(), key.size(), &tensor));
      if (!err) {
        sources.push_back(tensor_source(key, *tensor));
        continue;
      }
      if (err.code() != RH_ERROR_NOT_FOUND) rh::check(host_, err.release());
      rh_StringView bytes{};
      rh::check(host_, host_->StateDict_GetBytes(dict, key.data(), key.size(), &bytes));
      sources.push_back(bytes_source(key, bytes));
    }
    return sources;
  }

  // The file, complete under its name, with the checksums of `header`
  // (placeholders in `encoded`), computed on a second thread while the main
  // one writes the data; durable at the next Flush (pending_).
  void write_file(const FilePaths& paths, Header& header, const std::string& encoded,
                  const std::vector<Source>& sources) {
    uint64_t total = 0;
    for (const Source& s : sources) total += s.entry.size();
    std::vector<uint32_t> crcs(sources.size(), 0);
    auto checksum_all = [&] {
      for (size_t i = 0; i < sources.size(); ++i)
        crcs[i] = rh::crc32_update(0, sources[i].data, sources[i].entry.size());
    };
    std::thread checksums;
    struct Join {  // also when writing throws: the thread reads `sources`
      std::thread& t;
      ~Join() {
        if (t.joinable()) t.join();
      }
    } join{checksums};
    try {
      PosixFile file = PosixFile::create(paths.tmp);
      if (checksum_ && total >= kChecksumThreadBytes) checksums = std::thread(checksum_all);
      const std::string start = rh::safetensors::file_start(encoded);
      // No bigger than the file: most checkpoints of small models are far below a block.
      rh::posix::BufferedWriter out(
          file, static_cast<size_t>(std::min<uint64_t>(kWriteBlock, start.size() + total)));
      out.write(start.data(), start.size());
      for (const Source& s : sources) out.write(s.data, s.entry.size());
      out.flush();
      if (checksum_) {
        if (checksums.joinable())
          checksums.join();
        else
          checksum_all();
        for (size_t i = 0; i < sources.size(); ++i) header.tensors[i].crc32 = crcs[i];
        const std::string final_header = rh::safetensors::encode_header(header);
        if (final_header.size() != encoded.size())
          throw rh::Exception(
              RH_ERROR_INTERNAL,
              "safetensors: " + paths.file + ": the header changed size with its checksums");
        file.write_at(8, final_header.data(), final_header.size());
      }
      file.start_writeback();
      rh::posix::rename_file(paths.tmp, paths.file);
      pending_.push_back({std::move(file), paths.dir});
    } catch (...) {
      ::unlink(paths.tmp.c_str());  // best effort: it may never have been created
      throw;
    }
  }

  // Tensor `key` of `dtype` and `shape` into the dict: `fill` writes its
  // bytes straight into memory the host gives (StateDict_AllocTensor), or
  // into `buffer`, which StateDict_PutTensor then copies (a host before 1.7).
  template <typename Fill>
  void read_tensor(rh_StateDict* dict, const std::string& key, const Dtype& dtype,
                   std::vector<int64_t> shape, const Fill& fill,
                   std::vector<unsigned char>& buffer) const {
    const DLDataType dl{dtype.code, dtype.bits, 1};
    if (RH_STRUCT_HAS(host_, rh_HostApi, StateDict_AllocTensor) &&
        host_->StateDict_AllocTensor != nullptr) {
      void* data = nullptr;
      rh::check(host_, host_->StateDict_AllocTensor(dict, key.data(), key.size(), dl, shape.data(),
                                                    static_cast<int32_t>(shape.size()), &data));
      if (data != nullptr) fill(static_cast<unsigned char*>(data));
      return;
    }
    uint64_t size = dtype.bytes();
    for (int64_t d : shape) size *= static_cast<uint64_t>(d);
    buffer.resize(static_cast<size_t>(size));
    fill(buffer.data());
    DLManagedTensor view{};
    view.dl_tensor.data = buffer.data();
    view.dl_tensor.device = DLDevice{kDLCPU, 0};
    view.dl_tensor.ndim = static_cast<int32_t>(shape.size());
    view.dl_tensor.dtype = dl;
    view.dl_tensor.shape = shape.data();
    rh::check(host_, host_->StateDict_PutTensor(dict, key.data(), key.size(), &view));
  }

  const rh_HostApi* host_;
  bool checksum_ = true;
  // Files saved since the last Flush, still open, not yet fsynced.
  struct Pending {
    PosixFile file;
    std::string dir;
  };
  std::vector<Pending> pending_;
  // Files Verify found whole, as they were then: Load does not check their
  // checksums again while they are unchanged.
  std::map<std::string, rh::posix::FileIdentity> verified_;
};

const rh_Component kComponents[] = {
    rh::checkpoint_io_component<SafetensorsCheckpointIo>(
        "safetensors", "state dicts as .safetensors files (atomic write, per-tensor CRC-32)"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_ckpt_io_safetensors", "0.1.0", RH_NATIVE_TAG_NONE, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)

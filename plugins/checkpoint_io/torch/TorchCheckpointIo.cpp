// Checkpoint IO `torch`: each state dict becomes one file `<dir>/<stem>.pt`
// that Python's torch.load reads as a dict (LibTorch's pickler writes
// torch.save's zip format).
//
// Config:
//   checkpoint_io:
//     type: torch
//
// State dict -> file: a dict of str -> Tensor, every tensor as it is (CPU,
// contiguous); a byte blob "k" becomes the uint8 tensor "__bytes__.k" (a
// pickled dict of tensors has no bytes type), turned back into bytes by
// Load. Save writes `<stem>.pt.tmp`, fsyncs it, renames it over `<stem>.pt`
// and fsyncs the directory. The zip archive goes straight to the file (the
// pickle, then each tensor's bytes as a record), as Python's torch.save
// writes it, never the whole file in memory (torch::pickle_save builds it
// in a std::vector: 6x slower on a 437 MB state, measured). Load and Verify
// unpickle the whole file, reading its records from the file: the zip
// reader checks every record's size and CRC-32, so a truncated or corrupted
// file is an RH_ERROR_DATA_LOSS error naming it. There is no LoadSlices: a
// rank resuming on another world size loads the files it needs whole
// (docs/checkpoint-format.md).
#include <fcntl.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"

namespace {

constexpr const char* kBytesPrefix = "__bytes__.";

[[noreturn]] void io_error(const std::string& what, int err) {
  throw rh::Exception(RH_ERROR_IO, "torch checkpoint IO: " + what + ": " + std::strerror(err));
}

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) io_error("cannot open " + path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) io_error("cannot fsync " + path, err);
}

struct Paths {
  std::string dir, file, tmp;
};

Paths paths_of(const rh_CheckpointFileArgs& args) {
  const std::string dir = rh::to_string(args.dir), stem = rh::to_string(args.stem);
  if (stem.empty() || stem == "." || stem == ".." || stem.find('/') != std::string::npos)
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "torch checkpoint IO: stem '" + stem + "' is not a plain file name");
  Paths p;
  p.dir = dir;
  p.file = dir + (dir.empty() || dir.back() == '/' ? "" : "/") + stem + ".pt";
  p.tmp = p.file + ".tmp";
  return p;
}

class TorchCheckpointIo {
 public:
  explicit TorchCheckpointIo(const rh_CreateArgs& args) : host_(args.host) {
    rh::Config cfg(args.host, args.config);  // no keys: an unknown one is refused
  }

  void save(const rh_CheckpointFileArgs& args) {
    const Paths p = paths_of(args);
    c10::Dict<std::string, at::Tensor> dict;
    const size_t n = host_->StateDict_Size(args.dict);
    for (size_t i = 0; i < n; ++i) {
      const std::string key = rh::to_string(host_->StateDict_KeyAt(args.dict, i));
      const DLManagedTensor* tensor = nullptr;
      rh::ErrorPtr err(host_,
                       host_->StateDict_GetTensor(args.dict, key.data(), key.size(), &tensor));
      if (!err) {
        dict.insert(key, rh::borrow_tensor(tensor).contiguous());
        continue;
      }
      if (err.code() != RH_ERROR_NOT_FOUND) rh::check(host_, err.release());
      rh_StringView bytes{};
      rh::check(host_, host_->StateDict_GetBytes(args.dict, key.data(), key.size(), &bytes));
      dict.insert(kBytesPrefix + key, at::from_blob(const_cast<char*>(bytes.data),
                                                    {static_cast<int64_t>(bytes.size)}, at::kByte)
                                          .clone());
    }
    // The pickle first (small: tensors are references to records). Without
    // aggregate type tags (tag_aggregates false): LibTorch tags a typed dict
    // with torch.jit._pickle.restore_type_tag, a global that torch.load's
    // weights_only unpickler (PyTorch 2.6's default) refuses; untagged it is
    // a plain dict of tensors, which every torch.load reads.
    std::vector<char> pickled;
    torch::jit::Pickler pickler(
        [&](const char* data, size_t size) { pickled.insert(pickled.end(), data, data + size); },
        /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
        /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(c10::IValue(dict));
    pickler.stop();
    try {
      const int fd = ::open(p.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) io_error("cannot create " + p.tmp, errno);
      // errno of the first failed write. The zip writer is told every write
      // succeeded (a short count makes it throw, and LibTorch 1.13's
      // writer can then throw again from its destructor); the rest is
      // skipped and the error reported after it.
      int write_error = 0;
      try {
        caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) -> size_t {
          const char* bytes = static_cast<const char*>(data);
          for (size_t done = 0; done < size && write_error == 0;) {
            const ssize_t w = ::write(fd, bytes + done, size - done);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) write_error = errno;
            if (w > 0) done += static_cast<size_t>(w);
          }
          return size;
        });
        torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(),
                                           pickler.tensorData(), writer);
        writer.writeEndOfFile();
      } catch (const std::exception& e) {
        ::close(fd);
        throw rh::Exception(RH_ERROR_IO, "torch checkpoint IO: cannot write " + p.tmp + ": " +
                                             std::string(e.what()).substr(0, 300));
      }
      if (write_error != 0) {
        ::close(fd);
        io_error("cannot write " + p.tmp, write_error);
      }
      if (::fsync(fd) != 0) {
        const int err = errno;
        ::close(fd);
        io_error("cannot fsync " + p.tmp, err);
      }
      if (::close(fd) != 0) io_error("cannot close " + p.tmp, errno);
      if (::rename(p.tmp.c_str(), p.file.c_str()) != 0)
        io_error("cannot rename " + p.tmp + " to " + p.file, errno);
    } catch (...) {
      ::unlink(p.tmp.c_str());
      throw;
    }
    fsync_path(p.dir, O_RDONLY | O_DIRECTORY);
  }

  void load(const rh_CheckpointFileArgs& args) {
    const Paths p = paths_of(args);
    const c10::Dict<c10::IValue, c10::IValue> dict = read(p.file);
    for (const auto& item : dict) {
      const std::string key = item.key().toStringRef();
      const at::Tensor t = item.value().toTensor().contiguous();
      if (key.rfind(kBytesPrefix, 0) == 0) {
        const std::string name = key.substr(std::strlen(kBytesPrefix));
        rh::check(host_, host_->StateDict_PutBytes(args.dict, name.data(), name.size(),
                                                   t.data_ptr(), static_cast<size_t>(t.nbytes())));
        continue;
      }
      DLManagedTensor* dl = rh::export_tensor(t);
      rh_Error* err = host_->StateDict_PutTensor(args.dict, key.data(), key.size(), dl);
      dl->deleter(dl);
      rh::check(host_, err);
    }
  }

  void verify(const rh_CheckpointFileArgs& args) { (void)read(paths_of(args).file); }

 private:
  // The whole file unpickled; what is not a dict of str -> Tensor, or does
  // not unpickle, is DATA_LOSS naming the file.
  static c10::Dict<c10::IValue, c10::IValue> read(const std::string& file) {
    {
      const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        if (errno == ENOENT)
          throw rh::Exception(RH_ERROR_NOT_FOUND, file + ": no such file (a missing shard file)");
        io_error("cannot open " + file, errno);
      }
      ::close(fd);
    }
    c10::IValue value;
    try {
      // Records are read from the file one at a time (each CRC-checked).
      caffe2::serialize::PyTorchStreamReader reader(file);
      value = torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"",
                                                /*tensor_prefix=*/"", /*type_resolver=*/{},
                                                /*obj_loader=*/{}, /*device=*/{}, reader);
    } catch (const std::exception& e) {
      throw rh::Exception(RH_ERROR_DATA_LOSS,
                          file + ": not a readable torch.save file (truncated or corrupted): " +
                              std::string(e.what()).substr(0, 300));
    }
    if (!value.isGenericDict())
      throw rh::Exception(RH_ERROR_DATA_LOSS,
                          file + ": holds a " + value.tagKind() + ", not a dict of tensors");
    c10::Dict<c10::IValue, c10::IValue> dict = value.toGenericDict();
    for (const auto& item : dict)
      if (!item.key().isString() || !item.value().isTensor())
        throw rh::Exception(RH_ERROR_DATA_LOSS,
                            file + ": holds an entry that is not str -> Tensor");
    return dict;
  }

  const rh_HostApi* host_;
};

const rh_Component kComponents[] = {
    rh::checkpoint_io_component<TorchCheckpointIo>(
        "torch", "state dicts as .pt files Python's torch.load reads (atomic write)"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_ckpt_io_torch", "0.1.0", RH_NATIVE_TAG_TORCH, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)

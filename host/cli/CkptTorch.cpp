// `runner-host ckpt convert --to torch`: the one part of the checkpoint tool
// that needs LibTorch. It writes what Python's torch.save writes (the zip
// format: torch::pickle_save's steps), so torch.load gives back a dict of
// tensors: a plain one, without LibTorch's aggregate type tags
// (torch.jit._pickle.restore_type_tag), which torch.load's weights_only
// unpickler, PyTorch 2.6's default, refuses.
#include <ATen/DLConvertor.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <fstream>

#include "abi/HostError.hpp"
#include "cli/CkptTool.hpp"

namespace rh::cli {

void write_torch_file(const std::map<std::string, rh_StateDict::Entry>& tensors,
                      const std::filesystem::path& out) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, e] : tensors) {
    auto options = at::TensorOptions().dtype(at::toScalarType(e.dtype));
    dict.insert(name,
                at::from_blob(const_cast<uint8_t*>(e.data()), at::IntArrayRef(e.shape), options));
  }
  std::vector<char> pickled;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t size) { pickled.insert(pickled.end(), data, data + size); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();
  std::vector<char> bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) -> size_t {
    bytes.insert(bytes.end(), static_cast<const char*>(data),
                 static_cast<const char*>(data) + size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(),
                                     writer);
  writer.writeEndOfFile();
  const std::string tmp = out.string() + ".tmp";
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    file.flush();
    if (!file) {
      std::filesystem::remove(tmp);
      throw host::HostError(RH_ERROR_IO, "cannot write " + tmp);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, out, ec);
  if (ec) throw host::HostError(RH_ERROR_IO, "cannot rename " + tmp + ": " + ec.message());
}

}  // namespace rh::cli

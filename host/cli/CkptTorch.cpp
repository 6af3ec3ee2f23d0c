// `runner-host ckpt convert --to torch`: the one part of the checkpoint tool
// that needs LibTorch. torch::pickle_save writes what Python's torch.save
// writes (the zip format), so torch.load gives back a dict of tensors.
#include <ATen/DLConvertor.h>
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
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
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

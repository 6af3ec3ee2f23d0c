// Regenerates deterministic_probe_scripted.pt, the TorchScript module of
// LifecycleTest.DeterministicMakesAnOpWithoutADeterministicKernelAnError
// (the job key `deterministic`):
//
//   g++ -std=c++17 tests/data/model/make_deterministic_probe_scripted.cpp \
//       -I/usr/include/torch/csrc/api/include -ltorch -ltorch_cpu -lc10 -o /tmp/make_probe
//   /tmp/make_probe tests/data/model
//
// A linear classifier 8 -> 3 (`head`) whose forward also calls
// Tensor.put_(accumulate=False) on a scratch tensor on the input's device:
// an op that has no deterministic implementation on the CPU or a GPU, so it
// raises once at::globalContext().setDeterministicAlgorithms(true) is in
// effect (what torch.use_deterministic_algorithms(True) sets) and is
// harmless otherwise
// (the scratch value is 1, the logits are the linear layer's). Written in C++
// because the Debian machine has LibTorch but no Python torch; LibTorch 1.13
// saves it.
#include <torch/script.h>
#include <torch/torch.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUT_DIR\n";
    return 2;
  }
  torch::manual_seed(0);
  torch::jit::Module head("__torch__.ProbeHead");
  head.register_parameter("weight", (torch::randn({3, 8}) / std::sqrt(8.0)).requires_grad_(),
                          false);
  head.register_parameter("bias", torch::zeros({3}).requires_grad_(), false);
  torch::jit::Module probe("__torch__.DeterministicProbe");
  probe.register_module("head", head);
  probe.define(R"JIT(
def forward(self, x):
    mark = torch.zeros([1], device=x.device)
    mark.put_(torch.tensor([0], device=x.device), torch.ones([1], device=x.device), False)
    return torch.addmm(self.head.bias, x, self.head.weight.t()) * mark
)JIT");
  const std::string out = std::string(argv[1]) + "/deterministic_probe_scripted.pt";
  probe.save(out);
  std::cout << out << "\n";
  return 0;
}

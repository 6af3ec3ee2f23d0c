// Regenerates the TorchScript modules of the ddp tests whose parameters do not
// all get a gradient:
//
//   g++ -std=c++17 tests/data/model/make_unused_param_scripted.cpp \
//       -I/usr/include/torch/csrc/api/include -ltorch -ltorch_cpu -lc10 -o /tmp/make_unused
//   /tmp/make_unused tests/data/model
//
// unused_param_mlp_scripted.pt: an MLP 16 -> 32 -> 32 -> 4 (fc1, fc2, head)
// and `unused`, a 32 x 32 linear layer registered last that forward never
// calls: in reverse registration order (ddp's first bucket plan) it comes
// first.
// branchy_mlp_scripted.pt: the same MLP with `branch`, a 16 x 16 layer
// (registered last) added to the input of a batch whose inputs sum to > 0:
// which ranks use it changes from step to step, and its gradients are the
// last of a backward.
// Written in C++ because the Debian machine has LibTorch but no Python
// torch; LibTorch 1.13 saves them.
#include <torch/script.h>
#include <torch/torch.h>

#include <iostream>

namespace {

torch::jit::Module linear(const std::string& type, int64_t in, int64_t out) {
  torch::jit::Module m("__torch__." + type);
  // Trainable, as nn.Parameter makes them (a plain tensor does not require grad).
  m.register_parameter(
      "weight", (torch::randn({out, in}) / std::sqrt(static_cast<double>(in))).requires_grad_(),
      false);
  m.register_parameter("bias", torch::zeros({out}).requires_grad_(), false);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUT_DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  torch::manual_seed(0);
  torch::jit::Module unused("__torch__.UnusedParamMlp");
  unused.register_module("fc1", linear("Fc1", 16, 32));
  unused.register_module("fc2", linear("Fc2", 32, 32));
  unused.register_module("head", linear("Head", 32, 4));
  unused.register_module("unused", linear("Unused", 32, 32));
  unused.define(R"JIT(
def forward(self, x):
    h = torch.relu(torch.addmm(self.fc1.bias, x, self.fc1.weight.t()))
    h = torch.relu(torch.addmm(self.fc2.bias, h, self.fc2.weight.t()))
    return torch.addmm(self.head.bias, h, self.head.weight.t())
)JIT");
  unused.save(dir + "/unused_param_mlp_scripted.pt");

  torch::jit::Module branchy("__torch__.BranchyMlp");
  branchy.register_module("fc1", linear("BFc1", 16, 32));
  branchy.register_module("fc2", linear("BFc2", 32, 32));
  branchy.register_module("head", linear("BHead", 32, 4));
  branchy.register_module("branch", linear("BBranch", 16, 16));
  branchy.define(R"JIT(
def forward(self, x):
    if bool(x.sum() > 0.0):
        x = x + torch.relu(torch.addmm(self.branch.bias, x, self.branch.weight.t()))
    h = torch.relu(torch.addmm(self.fc1.bias, x, self.fc1.weight.t()))
    h = torch.relu(torch.addmm(self.fc2.bias, h, self.fc2.weight.t()))
    return torch.addmm(self.head.bias, h, self.head.weight.t())
)JIT");
  branchy.save(dir + "/branchy_mlp_scripted.pt");
  std::cout << dir << "\n";
  return 0;
}

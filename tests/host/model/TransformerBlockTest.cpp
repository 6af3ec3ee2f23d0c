// The attention of the built-in transformer blocks: LibTorch's fused
// scaled_dot_product_attention (2.0+) against the written-out
// matmul-softmax-matmul it replaces, causal (gpt) and not (vit), values and
// gradients within float32 tolerance (on a GPU too, and in bfloat16);
// dropout only while training.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/TransformerBlock.hpp"
#include "rh/cpp/torch_compat.hpp"

namespace rh::model {
namespace {

TEST(TransformerBlockTest, FusedAttentionEqualsTheWrittenOutOne) {
  if (!compat::kHasFusedAttention)
    GTEST_SKIP() << "LibTorch " << TORCH_VERSION
                 << " has no scaled_dot_product_attention (2.0+): the blocks compute it written "
                    "out; the GPU check (tools/gpu_check.sh, LibTorch 2.x) runs this test";
  torch::manual_seed(3);
  // On the CPU, and on a GPU when there is one (its flash / memory-efficient
  // kernels; float32 rules out flash, so a half-precision pass too).
  std::vector<std::pair<torch::TensorOptions, double>> cases = {
      {torch::TensorOptions().dtype(torch::kFloat), 1e-5}};
  if (torch::cuda::is_available()) {
    cases.push_back({torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA), 1e-5});
    cases.push_back({torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA), 5e-2});
  }
  for (const auto& [opts, tolerance] : cases)
    for (bool causal : {true, false}) {
      SCOPED_TRACE(std::string(causal ? "causal" : "not causal") + " on " + opts.device().str() +
                   " in " + c10::toString(opts.dtype().toScalarType()));
      // (B, H, T, d)
      at::Tensor q = torch::randn({2, 3, 17, 8}, opts).requires_grad_();
      at::Tensor k = torch::randn({2, 3, 17, 8}, opts).requires_grad_();
      at::Tensor v = torch::randn({2, 3, 17, 8}, opts).requires_grad_();
      at::Tensor g = torch::randn({2, 3, 17, 8}, opts);
      auto grads = [&](AttentionKernel kernel) {
        for (at::Tensor* t : {&q, &k, &v})
          if (t->grad().defined()) t->mutable_grad() = at::Tensor();
        at::Tensor out = self_attention(q, k, v, causal, 0.0, true, kernel);
        (out * g).sum().backward();
        return std::vector<at::Tensor>{out.detach(), q.grad().clone(), k.grad().clone(),
                                       v.grad().clone()};
      };
      const auto fused = grads(AttentionKernel::kFused);
      const auto plain = grads(AttentionKernel::kExplicit);
      const char* what[] = {"output", "dq", "dk", "dv"};
      for (size_t i = 0; i < fused.size(); ++i)
        EXPECT_TRUE(torch::allclose(fused[i].to(torch::kFloat), plain[i].to(torch::kFloat),
                                    tolerance, tolerance))
            << what[i] << ": max |diff| "
            << (fused[i].to(torch::kFloat) - plain[i].to(torch::kFloat)).abs().max().item<float>();
    }
}

// Dropout on the attention weights only while training, on either kernel:
// in eval the block's attention equals the one without dropout; in training
// it differs (and draws from the generator the checkpoint saves).
TEST(TransformerBlockTest, AttentionDropoutOnlyWhileTraining) {
  torch::manual_seed(5);
  at::Tensor q = torch::randn({2, 2, 9, 4}), k = torch::randn({2, 2, 9, 4}),
             v = torch::randn({2, 2, 9, 4});
  const AttentionKernel kernel = default_attention_kernel();
  const at::Tensor none = self_attention(q, k, v, true, 0.0, true, kernel);
  EXPECT_TRUE(torch::allclose(self_attention(q, k, v, true, 0.5, false, kernel), none));
  EXPECT_FALSE(torch::allclose(self_attention(q, k, v, true, 0.5, true, kernel), none));
}

TEST(TransformerBlockTest, CausalAttentionIgnoresTheFuture) {
  torch::manual_seed(4);
  at::Tensor q = torch::randn({1, 2, 6, 4});
  at::Tensor k = torch::randn({1, 2, 6, 4});
  at::Tensor v = torch::randn({1, 2, 6, 4});
  at::Tensor k2 = k.clone(), v2 = v.clone();
  k2.narrow(2, 4, 2).normal_();  // change tokens 4 and 5
  v2.narrow(2, 4, 2).normal_();
  const AttentionKernel kernel = default_attention_kernel();
  at::Tensor a = self_attention(q, k, v, true, 0.0, false, kernel);
  at::Tensor b = self_attention(q, k2, v2, true, 0.0, false, kernel);
  EXPECT_TRUE(torch::equal(a.narrow(2, 0, 4), b.narrow(2, 0, 4)));
  EXPECT_FALSE(torch::equal(a.narrow(2, 4, 2), b.narrow(2, 4, 2)));
}

}  // namespace
}  // namespace rh::model

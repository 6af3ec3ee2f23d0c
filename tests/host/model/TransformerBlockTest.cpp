// The attention of the built-in transformer blocks: LibTorch's fused
// scaled_dot_product_attention (2.0+) against the written-out
// matmul-softmax-matmul it replaces, causal (gpt) and not (vit), values and
// gradients within a bound derived from the arithmetic (in float64 on the
// CPU; on a GPU in float32 and bfloat16); dropout only while training.
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
  // How far the two kernels can be apart, per element (u: the unit
  // roundoff; inputs N(0, 1) with |x| <= 4 and rows of norm <= 5; T = 17,
  // d = 8). A score q·k/sqrt(d): 8 products, within ~9u·25/2.8 = 80u of
  // exact on each side; a softmax weight p: that twice, the max subtracted,
  // exp, a sum of 17 and a division, ~200u relative; an output Σ_j p·v:
  // (17u + 200u)·max|v| ~ 900u. The gradients sum over up to T = 17 queries
  // a key or value serves (Σ_i p_ij <= 17), and dS = p·(dP - rowsum(dO∘O))
  // carries the ~5e3·u error of that row sum: dk within ~4e5·u of exact on
  // each side, ~1e6·u apart in the worst case.
  // - CPU, float64 (u = 2^-53; LibTorch's CPU flash kernel takes double):
  //   1e6·u = 1.1e-10; 1e-9 leaves 9x. In float32 (u = 2^-24) the same
  //   worst case is 0.06: no use, hence float64.
  // - GPU, float32: no useful worst case either (0.06); 1e-4 is an
  //   effect-size bound: tools/gpu_check.sh measured within 1e-5, and a
  //   wrong scale, mask or softmax axis moves values by 0.1 to 1.
  // - GPU, bfloat16 (u = 2^-8, scores and weights rounded to it inside the
  //   kernels: a score of 9 within 0.035 already moves a weight 3.5%):
  //   5e-2, an effect-size bound likewise.
  std::vector<std::pair<torch::TensorOptions, double>> cases = {
      {torch::TensorOptions().dtype(torch::kDouble), 1e-9}};
  if (torch::cuda::is_available()) {
    cases.push_back({torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA), 1e-4});
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
        EXPECT_TRUE(torch::allclose(fused[i].to(torch::kDouble), plain[i].to(torch::kDouble),
                                    tolerance, tolerance))
            << what[i] << ": max |diff| "
            << (fused[i].to(torch::kDouble) - plain[i].to(torch::kDouble))
                   .abs()
                   .max()
                   .item<double>();
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
  // Bit for bit: out of training either kernel computes without dropout.
  EXPECT_TRUE(torch::equal(self_attention(q, k, v, true, 0.5, false, kernel), none));
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

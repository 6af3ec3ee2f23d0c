// token_bin (nanoGPT's train.bin) and megatron_indexed (Megatron-LM's
// .bin/.idx): the files are written by numpy (Debian's python3-numpy), as
// nanoGPT's prepare.py writes them, and the Megatron index byte by byte with
// struct, as megatron/core/datasets/indexed_dataset.py lays it out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "common/TestUtil.hpp"
#include "config/ConfigNode.hpp"
#include "data/TokenShardDataset.hpp"
#include "host/data/DataTestUtil.hpp"

namespace rh::data {
namespace {

using ::testing::HasSubstr;

// Runs `script` with Debian's python3 (numpy) in `dir`.
void python(const rh::test::TempDir& dir, const std::string& script) {
  const auto path = dir.write("make.py", "import numpy as np, struct\n" + script);
  const auto r = rh::test::run_command("cd " + rh::test::quote(dir.path().string()) +
                                       " && /usr/bin/python3 " + rh::test::quote(path.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

std::shared_ptr<Dataset> token_dataset(const std::string& dataset_yaml,
                                       const std::string& job_dir) {
  auto cfg = test::yaml("dataset: " + dataset_yaml);
  return build_dataset(*cfg->find("dataset"), job_dir);
}

std::vector<int64_t> values(const torch::Tensor& t) {
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

std::vector<int64_t> range(int64_t from, int64_t n, int64_t times = 1) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back((from + i) * times);
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenShardDataset, TokenBinIsReadAsNumpyWroteIt) {
  rh::test::TempDir dir;
  python(dir,
         "np.arange(100, dtype=np.uint16).tofile('train.bin')\n"
         "(np.arange(100, dtype=np.uint32) * 70000).tofile('wide.bin')\n");
  // Consecutive blocks of T = 8: example i is tokens [8i, 8i+8), targets one on.
  auto d = token_dataset("{type: token_bin, path: train.bin, block_size: 8}", dir.path().string());
  EXPECT_EQ(d->task(), model::Task::LanguageModel);
  EXPECT_EQ(d->size(), 12u);  // (100 - 9) / 8 + 1
  const Example e = d->get(11);
  EXPECT_EQ(values(e.input), range(88, 8));
  EXPECT_EQ(values(e.target), range(89, 8));
  // uint32, ids beyond uint16's; stride 1: every window.
  auto w =
      token_dataset("{type: token_bin, path: wide.bin, dtype: uint32, block_size: 4, stride: 1}",
                    dir.path().string());
  EXPECT_EQ(w->size(), 96u);  // 100 - 5 + 1
  EXPECT_EQ(values(w->get(95).input), range(95, 4, 70000));
  EXPECT_EQ(values(w->get(95).target), range(96, 4, 70000));
}

// The .bin holds three documents (5, 3 and 4 tokens) one after another; the
// index gives their lengths, byte offsets and the document starts.
const std::string kMegatron =
    "docs = [np.arange(0, 5), np.arange(10, 13), np.arange(20, 24)]\n"
    "def write(prefix, dtype, code, offsets=None, magic=b'MMIDIDX\\x00\\x00'):\n"
    "    np.concatenate(docs).astype(dtype).tofile(prefix + '.bin')\n"
    "    size = np.dtype(dtype).itemsize\n"
    "    lengths = [len(d) for d in docs]\n"
    "    if offsets is None:\n"
    "        offsets = [sum(lengths[:i]) * size for i in range(len(docs))]\n"
    "    with open(prefix + '.idx', 'wb') as f:\n"
    "        f.write(magic + struct.pack('<Q', 1) + struct.pack('<B', code))\n"
    "        f.write(struct.pack('<Q', len(docs)) + struct.pack('<Q', len(docs) + 1))\n"
    "        f.write(np.array(lengths, dtype=np.int32).tobytes())\n"
    "        f.write(np.array(offsets, dtype=np.int64).tobytes())\n"
    "        f.write(np.arange(len(docs) + 1, dtype=np.int64).tobytes())\n";

TEST(TokenShardDataset, MegatronIndexedConcatenatesTheDocumentsInTheIndexsDtype) {
  rh::test::TempDir dir;
  python(dir, kMegatron + "write('corpus', np.int32, 4)\nwrite('small', np.uint16, 8)\n");
  const std::vector<int64_t> stream = {0, 1, 2, 3, 4, 10, 11, 12, 20, 21, 22, 23};
  for (const std::string prefix : {"corpus", "small"}) {
    SCOPED_TRACE(prefix);
    auto d = token_dataset("{type: megatron_indexed, path_prefix: " + prefix + ", block_size: 3}",
                           dir.path().string());
    ASSERT_EQ(d->size(), 3u);  // (12 - 4) / 3 + 1
    for (size_t i = 0; i < d->size(); ++i) {
      const Example e = d->get(i);
      EXPECT_EQ(values(e.input),
                std::vector<int64_t>(stream.begin() + 3 * i, stream.begin() + 3 * i + 3));
      EXPECT_EQ(values(e.target),
                std::vector<int64_t>(stream.begin() + 3 * i + 1, stream.begin() + 3 * i + 4));
    }
  }
}

TEST(TokenShardDataset, FilesThatDoNotMatchAreNamedWithTheOffset) {
  rh::test::TempDir dir;
  python(dir, kMegatron +
                  "np.arange(7, dtype=np.uint8).tofile('odd.bin')\n"
                  "np.arange(5, dtype=np.uint16).tofile('short.bin')\n"
                  "write('magic', np.int32, 4, magic=b'NOTANIDX\\x00')\n"
                  "write('gap', np.int32, 4, offsets=[0, 20, 36])\n"
                  "write('dtype', np.float32, 7)\n"
                  "write('vocab', np.uint16, 8)\n");
  const std::string root = dir.path().string();
  const auto build = [&](const std::string& yaml) {
    return [&root, yaml] { token_dataset(yaml, root); };
  };
  EXPECT_THAT(error_of(build("{type: token_bin, path: odd.bin}")),
              HasSubstr("odd.bin': 7 bytes is not a whole number of 2-byte tokens"));
  EXPECT_THAT(error_of(build("{type: token_bin, path: short.bin, block_size: 8}")),
              HasSubstr("short.bin': 5 tokens, fewer than one example's block_size + 1 = 9"));
  EXPECT_THAT(error_of(build("{type: token_bin, path: missing.bin}")), HasSubstr("missing.bin"));
  EXPECT_THAT(error_of(build("{type: megatron_indexed, path_prefix: magic}")),
              HasSubstr("magic.idx': at byte 0: no MMIDIDX magic"));
  // Sequence 1 should start at byte 20 (5 int32 tokens), sequence 2 at 32.
  EXPECT_THAT(error_of(build("{type: megatron_indexed, path_prefix: gap}")),
              HasSubstr("gap.idx': at byte 62: sequence 2 starts at .bin byte 36, expected 32"));
  EXPECT_THAT(error_of(build("{type: megatron_indexed, path_prefix: dtype}")),
              HasSubstr("dtype.idx': at byte 17: dtype code 7 is not an integer token type"));
  // A token at or above vocab_size is named by its place when it is read.
  auto v = token_dataset(
      "{type: megatron_indexed, path_prefix: vocab, block_size: 3, vocab_size: 21}", root);
  EXPECT_EQ(values(v->get(1).input), (std::vector<int64_t>{3, 4, 10}));
  EXPECT_THAT(error_of([&] { v->get(2); }),
              HasSubstr("vocab.bin': token 9 (byte 18) is 21, not below vocab_size 21"));
}

}  // namespace
}  // namespace rh::data

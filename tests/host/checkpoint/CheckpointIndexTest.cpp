// The tensor table of meta.json (CheckpointIndex) and reading ranges of
// logical tensors from their shards (ShardReader) through the real
// safetensors plugin: shards tile their tensor or the table is refused
// naming the tensor; the table survives JSON; a range across shards is
// assembled from exactly the stored pieces (LoadSlices), and a shard that is
// not what meta.json says names its file, its key and its tensor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <numeric>

#include "abi/HostError.hpp"
#include "abi/StateDict.hpp"
#include "checkpoint/CheckpointIndex.hpp"
#include "checkpoint/CheckpointStore.hpp"
#include "checkpoint/ShardReader.hpp"
#include "common/PluginTestHost.hpp"
#include "rh/cpp/crc32.hpp"

namespace rh::test {
namespace {

namespace fs = std::filesystem;
using checkpoint::ShardRecord;
using ::testing::HasSubstr;

ShardRecord record(const std::string& tensor, std::vector<int64_t> shape, const std::string& file,
                   int64_t offset, int64_t numel) {
  ShardRecord r;
  r.tensor = tensor;
  r.shape = std::move(shape);
  r.dtype = "F32";
  r.shard = {file, tensor, offset, numel, 0};
  return r;
}

TEST(CheckpointIndexTest, MergesEveryRanksShardsAndKeepsARepeatedRangeOnce) {
  const auto index = checkpoint::merge_records({
      record("optim.w.exp_avg", {4, 3}, "optimizer.rank1", 6, 6),
      record("optim.w.exp_avg", {4, 3}, "optimizer.rank0", 0, 6),
      record("optim.w.step", {}, "optimizer.rank0", 0, 1),
      record("optim.w.step", {}, "optimizer.rank1", 0, 1),  // every rank holds the step
  });
  ASSERT_EQ(index.size(), 2u);
  const auto& t = index.at("optim.w.exp_avg");
  ASSERT_EQ(t.shards.size(), 2u);
  EXPECT_EQ(t.shards[0].file, "optimizer.rank0");  // by offset
  EXPECT_EQ(t.shards[1].offset, 6);
  ASSERT_EQ(index.at("optim.w.step").shards.size(), 1u);
  EXPECT_EQ(index.at("optim.w.step").shards[0].file, "optimizer.rank0");
}

// Each record's checksum once its file is written: the one the plugin
// reported while writing the entry (StateDict_SetChecksum) is taken as it
// is, else it is computed from the entry's bytes.
TEST(CheckpointIndexTest, ChecksumsAreThePluginsOrComputed) {
  rh_StateDict model, optim;
  const float w[3] = {1, 2, 3}, m[2] = {4, 5};
  host::alloc_tensor_entry(model, "w", {kDLFloat, 32, 1}, {3}, sizeof w);
  std::memcpy(const_cast<uint8_t*>(model.entries.at("w").data()), w, sizeof w);
  host::alloc_tensor_entry(optim, "w.m", {kDLFloat, 32, 1}, {2}, sizeof m);
  std::memcpy(const_cast<uint8_t*>(optim.entries.at("w.m").data()), m, sizeof m);
  optim.entries.at("w.m").crc32 = 0xfeedbeefu;  // what the plugin said it wrote
  std::vector<checkpoint::ShardRecord> records = {record("model.w", {3}, "model", 0, 3),
                                                  record("optim.w.m", {2}, "optimizer", 0, 2)};
  records[0].shard.key = "w";
  records[1].shard.key = "w.m";
  checkpoint::fill_checksums(records, {{"model", &model}, {"optimizer", &optim}});
  EXPECT_EQ(records[0].shard.crc32, rh::crc32_update(0, w, sizeof w));
  EXPECT_EQ(records[1].shard.crc32, 0xfeedbeefu);
  try {
    checkpoint::fill_checksums(records, {{"model", &model}});
    FAIL() << "a record of a file this rank does not write was accepted";
  } catch (const host::HostError& e) {
    EXPECT_EQ(e.code(), RH_ERROR_INTERNAL);
    EXPECT_THAT(e.what(), HasSubstr("file 'optimizer', which this rank does not write"));
  }
}

TEST(CheckpointIndexTest, ShardsThatDoNotTileTheirTensorAreRefusedNamingIt) {
  try {
    checkpoint::merge_records(
        {record("master.w", {10}, "a", 0, 4), record("master.w", {10}, "b", 5, 5)});
    FAIL() << "a gap was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor 'master.w': elements [4, 5) are in no shard"));
  }
  try {
    checkpoint::merge_records(
        {record("master.w", {10}, "a", 0, 6), record("master.w", {10}, "b", 4, 6)});
    FAIL() << "an overlap was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("shards overlap at element 4"));
  }
  try {
    checkpoint::merge_records({record("m", {10}, "a", 0, 10), record("m", {5, 2}, "b", 0, 10)});
    FAIL() << "two shapes were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor 'm' is reported as F32 [5,2] and as F32 [10]"));
  }
}

TEST(CheckpointIndexTest, RecordsAndTheTableSurviveTheirTextForms) {
  std::vector<ShardRecord> records = {record("model.a\tb\\c\nd", {2, 2}, "model", 0, 4)};
  records[0].shard.crc32 = 0xdeadbeef;
  const auto back = checkpoint::decode_records(checkpoint::encode_records(records));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].tensor, records[0].tensor);
  EXPECT_EQ(back[0].shard.crc32, 0xdeadbeefu);
  const auto index = checkpoint::merge_records(back);
  const auto parsed = checkpoint::parse_index(checkpoint::index_json(index, ""));
  ASSERT_EQ(parsed.count(records[0].tensor), 1u);
  const auto& t = parsed.at(records[0].tensor);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t.dtype, "F32");
  ASSERT_EQ(t.shards.size(), 1u);
  EXPECT_EQ(t.shards[0].crc32, 0xdeadbeefu);
}

TEST(CheckpointIndexTest, ParseRefusesWhatCannotBeATensor) {
  auto problem = [](const std::string& json) {
    try {
      checkpoint::parse_index(json);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string shard =
      R"("shards": [{"file": "m", "key": "w", "offset": 0, "numel": 4, "crc32": "0"}])";
  EXPECT_EQ(problem(R"({"w": {"shape": [4], "dtype": "F32", )" + shard + "}}"), "");
  EXPECT_THAT(problem(R"({"w": {"shape": [4], "dtype": "F31", )" + shard + "}}"),
              HasSubstr("tensor 'w': unknown dtype 'F31'"));
  EXPECT_THAT(problem(R"({"w": {"shape": [5], "dtype": "F32", )" + shard + "}}"),
              HasSubstr("tensor 'w': its shards hold 4 of its 5 elements"));
  EXPECT_THAT(problem(R"({"w": {"shape": [3], "dtype": "F32", )" + shard + "}}"),
              HasSubstr("a shard with offset 0 and numel 4 in 3 elements"));
  EXPECT_THAT(
      problem(R"({"w": {"shape": [4611686018427387904, 4], "dtype": "F32", )" + shard + "}}"),
      HasSubstr("overflows"));
}

TEST(CheckpointIndexTest, PiecesOfARangeAcrossShards) {
  const auto index = checkpoint::merge_records(
      {record("t", {12}, "a", 0, 5), record("t", {12}, "b", 5, 5), record("t", {12}, "c", 10, 2)});
  const auto pieces = checkpoint::pieces_of(index.at("t"), 3, 8);  // [3, 11)
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].shard->file, "a");
  EXPECT_EQ(pieces[0].shard_offset, 3);
  EXPECT_EQ(pieces[0].numel, 2);
  EXPECT_EQ(pieces[1].shard->file, "b");
  EXPECT_EQ(pieces[1].numel, 5);
  EXPECT_EQ(pieces[1].dest_offset, 2);
  EXPECT_EQ(pieces[2].shard->file, "c");
  EXPECT_EQ(pieces[2].numel, 1);
  EXPECT_EQ(pieces[2].dest_offset, 7);
}

// Two "ranks'" files each holding half of a [4, 3] tensor, read back by
// ranges that cross them.
class ShardReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.load("rh_ckpt_io_safetensors");
    io_ = host_.create_checkpoint_io("{type: safetensors}");
    store_ = std::make_unique<checkpoint::CheckpointStore>(host_.dir / "work", *io_);
    fs::create_directories(dir());
    std::vector<float> all(12);
    std::iota(all.begin(), all.end(), 0.f);
    for (int r = 0; r < 2; ++r) {
      rh_StateDict dict;
      put(dict, "w.exp_avg", all.data() + 6 * r, 6);
      store_->write_files(dir(), {{"optimizer.rank" + std::to_string(r), &dict}});
      records_.push_back(
          record("optim.w.exp_avg", {4, 3}, "optimizer.rank" + std::to_string(r), 6 * r, 6));
      records_.back().shard.key = "w.exp_avg";
    }
  }
  fs::path dir() const { return host_.dir / "work" / "ckpt"; }
  void put(rh_StateDict& dict, const char* key, float* data, int64_t n) {
    DLManagedTensor t{};
    t.dl_tensor.data = data;
    t.dl_tensor.device = {kDLCPU, 0};
    t.dl_tensor.ndim = 1;
    t.dl_tensor.dtype = {kDLFloat, 32, 1};
    t.dl_tensor.shape = &n;
    rh_Error* err = host_.api()->StateDict_PutTensor(&dict, key, std::strlen(key), &t);
    ASSERT_EQ(err, nullptr);
  }
  static std::vector<float> floats(const rh_StateDict& dict, const std::string& key) {
    const auto& e = dict.entries.at(key);
    std::vector<float> v(e.size() / 4);
    std::memcpy(v.data(), e.data(), e.size());
    return v;
  }

  PluginTestHost host_;
  std::unique_ptr<host::CheckpointIoInstance> io_;
  std::unique_ptr<checkpoint::CheckpointStore> store_;
  std::vector<ShardRecord> records_;
};

TEST_F(ShardReaderTest, ARangeAcrossShardsIsAssembledFromThePiecesRead) {
  const auto index = checkpoint::merge_records(records_);
  const checkpoint::ShardReader reader(*store_, dir(), index);
  rh_StateDict out;
  reader.read({{"optim.w.exp_avg", 4, 5, {}, "middle"},  // [4, 9): both files
               {"optim.w.exp_avg", 9, 3, std::vector<int64_t>{1, 3}, "last_row"},
               reader.whole("optim.w.exp_avg", "whole")},
              out);
  EXPECT_EQ(floats(out, "middle"), (std::vector<float>{4, 5, 6, 7, 8}));
  EXPECT_EQ(out.entries.at("last_row").shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(floats(out, "last_row"), (std::vector<float>{9, 10, 11}));
  EXPECT_EQ(out.entries.at("whole").shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(floats(out, "whole").back(), 11.f);
}

TEST_F(ShardReaderTest, AShardThatIsNotWhatMetaSaysNamesFileKeyAndTensor) {
  records_[1].shard.key = "w.exp_avg_sq";  // not in optimizer.rank1
  const auto index = checkpoint::merge_records(records_);
  const checkpoint::ShardReader reader(*store_, dir(), index);
  rh_StateDict out;
  try {
    reader.read({reader.whole("optim.w.exp_avg", "w")}, out);
    FAIL() << "a missing key was read";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("optimizer.rank1.safetensors"));
    EXPECT_THAT(e.what(), HasSubstr("w.exp_avg_sq"));
  }
  fs::remove(dir() / "optimizer.rank0.safetensors");
  try {
    reader.read({{"optim.w.exp_avg", 0, 2, {}, "w"}}, out);
    FAIL() << "a missing file was read";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("optimizer.rank0.safetensors"));
  }
}

TEST(Crc32Test, IsZlibsChecksum) {
  // zlib.crc32(b"123456789") == 0xcbf43926, the standard check value.
  EXPECT_EQ(rh::crc32_update(0, "123456789", 9), 0xcbf43926u);
  EXPECT_EQ(rh::crc32_update(rh::crc32_update(0, "1234", 4), "56789", 5), 0xcbf43926u);
}

// The carry-less-multiplication path (64 bytes and more, where the CPU has
// PCLMULQDQ) against the bit-at-a-time definition, at every alignment and
// length around its block sizes, and split at every point.
TEST(Crc32Test, EveryPathEqualsTheBitwiseDefinition) {
  auto bitwise = [](const unsigned char* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
      c ^= p[i];
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    }
    return ~c;
  };
  std::vector<unsigned char> buf(1200);
  uint32_t x = 12345;
  for (auto& b : buf) b = static_cast<unsigned char>((x = x * 1103515245u + 12345u) >> 24);
  for (size_t offset = 0; offset < 16; ++offset)
    for (size_t n : {size_t{0}, size_t{15}, size_t{63}, size_t{64}, size_t{65}, size_t{79},
                     size_t{80}, size_t{127}, size_t{128}, size_t{129}, size_t{1000}})
      EXPECT_EQ(rh::crc32_update(0, buf.data() + offset, n), bitwise(buf.data() + offset, n))
          << offset << " " << n;
  const uint32_t whole = bitwise(buf.data(), 1000);
  for (size_t cut = 0; cut <= 1000; cut += 37)
    EXPECT_EQ(rh::crc32_update(rh::crc32_update(0, buf.data(), cut), buf.data() + cut, 1000 - cut),
              whole)
        << cut;
}

}  // namespace
}  // namespace rh::test

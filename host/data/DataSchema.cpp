#include "data/DataSchema.hpp"

#include "data/image/PipelineSchema.hpp"

namespace rh::data {

config::Schema loader_schema() {
  using namespace config::schema;
  const config::Schema synthetic = map({
      {"num_samples", integer(1), true, "examples in this split"},
      {"num_features", integer(1), true, "F: input features"},
      {"num_classes", integer(2), true, "C: classes"},
      {"seed", integer(0), false, "fixes the class structure and the examples (default 0)"},
      {"split", enumeration({"train", "val", "test"}), false, "which examples (default train)"},
      {"noise", number(0), false, "std of the noise added to every feature (default 0.1)"},
  });
  const config::Schema char_lm = map({
      {"path", string(), true, "the text file, relative to the job directory"},
      {"block_size", integer(1), false, "T: tokens per example (default 64)"},
      {"split", enumeration({"train", "val"}), false, "default train"},
      {"val_fraction", number(0, 1), false, "the last part of the text that is val (default 0.1)"},
  });
  const config::Schema csv = map({
      {"path", string(), true, "the CSV file, relative to the job directory"},
      {"label_column", one_of({integer(), string()}, "a column index or name"), false,
       "default: the last column; negative indices count from the end"},
      {"header", boolean(), false, "the first row names the columns (default true)"},
      {"delimiter", string(), false, "one character (default ',')"},
      {"num_classes", integer(1), false, "default: the largest label + 1"},
  });
  const config::Schema mnist = map({
      {"root", string(), true, "the folder of the uncompressed idx files"},
      {"split", enumeration({"train", "test"}), false, "default train"},
      {"mean", number(), false, "default 0.1307"},
      {"std", number_above(0), false, "default 0.3081"},
  });
  const config::Schema cifar10 = map({
      {"root", string(), true, "the folder of data_batch_*.bin and test_batch.bin"},
      {"split", enumeration({"train", "test"}), false, "default train"},
      {"mean", list(number()), false, "3 values, one per channel (RGB)"},
      {"std", list(number_above(0)), false, "3 values, one per channel (RGB)"},
  });

  const config::Schema token_bin = map({
      {"path", string(), true,
       "nanoGPT's flat token file (train.bin), relative to the job directory"},
      {"dtype", enumeration({"uint16", "uint32"}), false, "the tokens' type (default uint16)"},
      {"block_size", integer(1), false, "T: tokens per example (default 64)"},
      {"stride", integer(1), false,
       "tokens between examples' starts (default block_size: consecutive blocks; 1: every "
       "window, random with shuffle)"},
      {"vocab_size", integer(1), false, "every token read must be below it (default: unchecked)"},
  });
  const config::Schema megatron_indexed = map({
      {"path_prefix", string(), true,
       "Megatron-LM's indexed dataset without .bin/.idx, relative to the job directory"},
      {"block_size", integer(1), false, "T: tokens per example (default 64)"},
      {"stride", integer(1), false, "as token_bin's"},
      {"vocab_size", integer(1), false, "every token read must be below it (default: unchecked)"},
  });

  // MMPretrain's CustomDataset and ImageNet (ImageFolderDataset.hpp).
  std::vector<config::schema::Field> image_fields = {
      {"data_root", string(), false,
       "the dataset's folder, relative to the job directory; data_prefix and ann_file are "
       "relative to it"},
      {"data_prefix",
       one_of({string(), map({{"img_path", string(), true}})}, "a folder or {img_path: folder}"),
       false, "the images' folder under data_root (ImageNet: the split's name)"},
      {"ann_file", string(), false,
       "`relative/path label` per line (default: class sub-folders; ImageNet: "
       "meta/<split>.txt where it exists)"},
      {"classes", one_of({list(string()), string()}, "a list of class names or a file of them"),
       false,
       "the class names, or a file of them one a line, relative to the job directory (default: "
       "the sub-folders' names)"},
      {"extensions", list(string()), false,
       "the image files' endings (default .jpg .jpeg .png .ppm .bmp .pgm .tif; JPEG and PNG "
       "decode)"},
      {"with_label", boolean(), false, "true only (the default)"},
      {"pipeline", data::image::pipeline_schema(), true,
       "the transforms, LoadImageFromFile first and PackInputs last (docs/data.md)"},
  };
  const config::Schema custom_dataset = map(image_fields);
  image_fields.push_back({"split", enumeration({"train", "val", "test"}), false,
                          "the default data_prefix and ann_file (test has no labels: refused)"});
  const config::Schema imagenet = map(image_fields);

  return map({
      {"dataset",
       typed_union("type",
                   {{"synthetic_classification", synthetic},
                    {"char_lm", char_lm},
                    {"token_bin", token_bin},
                    {"megatron_indexed", megatron_indexed},
                    {"csv", csv},
                    {"mnist", mnist},
                    {"cifar10", cifar10},
                    {"CustomDataset", custom_dataset},
                    {"ImageNet", imagenet}},
                   "dataset"),
       true},
      {"batch_size", integer(1), true, "examples per batch on each rank"},
      {"shuffle", boolean(), false, "reshuffle every epoch (default false)"},
      {"sampler",
       map({{"type", enumeration({"DefaultSampler"}), true},
            {"shuffle", boolean(), false, "as shuffle (default true, as MMEngine's)"}}),
       false, "MMEngine's form of shuffle: {type: DefaultSampler, shuffle}"},
      {"drop_last", boolean(), false, "drop the last incomplete batch (default false)"},
      {"num_workers", integer(0), false, "loader threads; 0 = load in the training thread"},
      {"prefetch", integer(1), false, "batches prepared ahead, in all (default 2)"},
      {"prefetch_factor", integer(1), false,
       "batches prepared ahead per worker (PyTorch's and MMEngine's key; instead of prefetch)"},
      {"persistent_workers", boolean(), false,
       "keep the workers between epochs (default false: started each epoch)"},
      {"pin_memory", boolean(), false,
       "batches in page-locked memory for the copy to a GPU (default false; nothing on a CPU)"},
  });
}

}  // namespace rh::data

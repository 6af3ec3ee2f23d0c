#include "data/image/PipelineSchema.hpp"

#include <map>
#include <string>

namespace rh::data::image {
namespace {

config::Schema interpolation_schema() {
  return config::schema::enumeration({"nearest", "bilinear", "bicubic", "area", "lanczos"});
}

config::Schema backend_schema() { return config::schema::enumeration({"cv2", "pillow"}); }

config::Schema load_schema() {
  using namespace config::schema;
  return map({
      {"type", string(), true},
      {"to_float32", boolean(), false, "false only (the default)"},
      {"color_type", enumeration({"color"}), false, "color only (the default): 3 channels, BGR"},
      {"imdecode_backend", enumeration({"cv2", "pillow", "turbojpeg"}), false,
       "accepted; all decode with libjpeg-turbo and libpng"},
      {"ignore_empty", boolean(), false, "false only (the default)"},
  });
}

config::Schema pack_schema() {
  using namespace config::schema;
  return map({{"type", string(), true}});
}

config::Schema random_resized_crop_schema() {
  using namespace config::schema;
  return map({
      {"type", string(), true},
      {"scale", one_of({integer(1), list(integer(1))}, "an integer or [height, width]"), true,
       "the output size: an integer (square) or [height, width]"},
      {"crop_ratio_range", list(number_above(0)), false,
       "the crop's area as a fraction of the image's, [min, max] (default [0.08, 1.0])"},
      {"aspect_ratio_range", list(number_above(0)), false,
       "the crop's width / height, [min, max] (default [3/4, 4/3])"},
      {"max_attempts", integer(0), false, "tries before the centre crop (default 10)"},
      {"interpolation", interpolation_schema(), false, "default bilinear"},
      {"backend", backend_schema(), false,
       "accepted; both resize with Pillow's resampler (docs/data.md)"},
  });
}

config::Schema resize_edge_schema() {
  using namespace config::schema;
  return map({
      {"type", string(), true},
      {"scale", integer(1), true, "the edge's length after the resize"},
      {"edge", enumeration({"short", "long", "width", "height"}), false, "default short"},
      {"interpolation", interpolation_schema(), false, "default bilinear"},
      {"backend", backend_schema(), false, "as RandomResizedCrop's"},
  });
}

config::Schema center_crop_schema() {
  using namespace config::schema;
  return map({
      {"type", string(), true},
      {"crop_size", one_of({integer(1), list(integer(1))}, "an integer or [width, height]"), true,
       "an integer (square) or [width, height]"},
  });
}

config::Schema random_flip_schema() {
  using namespace config::schema;
  const config::Schema direction = enumeration({"horizontal", "vertical", "diagonal"});
  return map({
      {"type", string(), true},
      {"prob", one_of({number(0, 1), list(number(0, 1))}, "a probability or a list of them"), true,
       "the flip's probability, or one per direction"},
      {"direction", one_of({direction, list(direction)}, "a direction or a list of them"), false,
       "horizontal, vertical or diagonal, or a list (default horizontal)"},
  });
}

}  // namespace

config::Schema rand_augment_schema() {
  using namespace config::schema;
  const config::Schema hparams = map({
      {"pad_val",
       one_of({number(0, 255), list(number(0, 255))}, "a number or a list of 3 numbers (B, G, R)"),
       false, "fill of Rotate/Shear/Translate outside the image, BGR (default 128)"},
      {"interpolation", enumeration({"nearest", "bilinear", "bicubic", "area"}), false,
       "of Rotate/Shear/Translate (default: Shear bicubic, Rotate and Translate nearest)"},
  });
  return map({
      {"type", enumeration({"RandAugment"}), true, "RandAugment"},
      {"policies",
       one_of({enumeration({"timm_increasing"})},
              "'timm_increasing' (the only policy set implemented; a list of policy dicts "
              "is not)"),
       true, "the preset policy set: timm_increasing"},
      {"num_policies", integer(1), true, "policies drawn per image, with replacement"},
      {"magnitude_level", number(0), true, "the level of every magnitude, 0..total_level"},
      {"magnitude_std", one_of({number(), enumeration({"inf"})}, "a number or 'inf'"), false,
       "level noise: N(magnitude_level, std) clipped to 0..total_level when > 0, "
       "U(0, magnitude_level) when 'inf' (default 0: none)"},
      {"total_level", number_above(0), false, "the level of the range's end (default 10)"},
      {"hparams", hparams, false, "pad_val and interpolation of the geometric policies"},
  });
}

config::Schema random_erasing_schema() {
  using namespace config::schema;
  const config::Schema bgr_value =
      one_of({number(0, 255), list(number(0, 255))}, "a number or a list of 3 numbers (B, G, R)");
  const config::Schema bgr_std =
      one_of({number(0), list(number(0))}, "a number or a list of 3 numbers (B, G, R)");
  return map({
      {"type", enumeration({"RandomErasing"}), true, "RandomErasing"},
      {"erase_prob", number(0, 1), false, "probability of erasing a rectangle (default 0.5)"},
      {"min_area_ratio", number(0, 1), false, "smallest rectangle / image area (default 0.02)"},
      {"max_area_ratio", number(0, 1), false, "largest rectangle / image area (default 0.4)"},
      {"aspect_range",
       one_of({number_above(0), list(number_above(0))}, "a number or a list of 2 numbers"), false,
       "(min, max) of the rectangle's h / w, or a for (a, 1/a) (default (0.3, 10/3))"},
      {"mode", enumeration({"const", "rand"}), false,
       "const: fill_color; rand: random pixels (default const)"},
      {"fill_color", bgr_value, false, "BGR fill, or the mean of rand's noise (default 128)"},
      {"fill_std", nullable(bgr_std), false,
       "rand: N(fill_color, fill_std) noise, BGR; unset: uniform 0..255"},
  });
}

config::Schema pipeline_schema() {
  return config::schema::list(
      config::schema::typed_union("type",
                                  {
                                      {"LoadImageFromFile", load_schema()},
                                      {"RandomResizedCrop", random_resized_crop_schema()},
                                      {"ResizeEdge", resize_edge_schema()},
                                      {"CenterCrop", center_crop_schema()},
                                      {"RandomFlip", random_flip_schema()},
                                      {"PackInputs", pack_schema()},
                                      {"RandAugment", rand_augment_schema()},
                                      {"RandomErasing", random_erasing_schema()},
                                  },
                                  "transform"));
}

}  // namespace rh::data::image

#include "data/image/Crops.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/image/Resize.hpp"

namespace rh::data::image {
namespace {

using config::ConfigError;
using config::Node;

// Python's int(round(x)): halves to even, as std::nearbyint in the default
// rounding mode.
int py_round(double x) { return static_cast<int>(std::nearbyint(x)); }

Interpolation interpolation_of(const Node& cfg, Interpolation fallback) {
  const Node* n = cfg.find("interpolation");
  if (n == nullptr) return fallback;
  try {
    return interpolation_from_name(n->as_string());
  } catch (const std::invalid_argument& e) {
    throw ConfigError(n->location(), n->path(), e.what());
  }
}

// An int, or a list of two ints, as (first, second); an int is both.
std::pair<int, int> size_pair(const Node& n) {
  if (!n.is_sequence()) {
    const int v = static_cast<int>(n.as_int());
    return {v, v};
  }
  if (n.seq_items().size() != 2)
    throw ConfigError(n.location(), n.path(),
                      "expected an integer or a list of 2, got " +
                          std::to_string(n.seq_items().size()) + " items");
  return {static_cast<int>(n.seq_items()[0]->as_int()),
          static_cast<int>(n.seq_items()[1]->as_int())};
}

std::pair<double, double> range_of(const Node& cfg, const std::string& key,
                                   std::pair<double, double> fallback) {
  const Node* n = cfg.find(key);
  if (n == nullptr) return fallback;
  if (n->seq_items().size() != 2)
    throw ConfigError(n->location(), n->path(),
                      "expected a list of 2 numbers (min, max), got " +
                          std::to_string(n->seq_items().size()) + " items");
  const std::pair<double, double> r{n->seq_items()[0]->as_double(), n->seq_items()[1]->as_double()};
  if (r.first > r.second || r.first <= 0)
    throw ConfigError(n->location(), n->path(), "expected 0 < min <= max");
  return r;
}

// MMPretrain's ResizeEdge: one edge (short, long, width or height) to
// `scale`, the other in proportion (truncated, as its int()).
class ResizeEdge : public Transform {
 public:
  enum class Edge { Short, Long, Width, Height };

  explicit ResizeEdge(const Node& cfg) {
    scale_ = static_cast<int>(cfg.find("scale")->as_int());
    if (const Node* n = cfg.find("edge")) {
      const std::string& e = n->as_string();
      edge_ = e == "long"     ? Edge::Long
              : e == "width"  ? Edge::Width
              : e == "height" ? Edge::Height
                              : Edge::Short;
    }
    how_ = interpolation_of(cfg, Interpolation::Bilinear);
  }

  void apply(Sample& s, SampleRng&) const override {
    const int h = s.img.height, w = s.img.width;
    int width, height;
    if ((edge_ == Edge::Short && w < h) || (edge_ == Edge::Long && w > h) || edge_ == Edge::Width) {
      width = scale_;
      height = static_cast<int>(static_cast<double>(scale_) * h / w);
    } else {
      height = scale_;
      width = static_cast<int>(static_cast<double>(scale_) * w / h);
    }
    s.img = resize(s.img, std::max(width, 1), std::max(height, 1), how_);
  }

 private:
  int scale_ = 0;
  Edge edge_ = Edge::Short;
  Interpolation how_ = Interpolation::Bilinear;
};

// mmcv's CenterCrop: crop_size (width, height) around the centre, the
// offsets rounded as Python's round(); an image smaller than the crop is
// kept whole along that side (auto_pad is not implemented).
class CenterCrop : public Transform {
 public:
  explicit CenterCrop(const Node& cfg) {
    const auto [w, h] = size_pair(*cfg.find("crop_size"));
    width_ = w;
    height_ = h;
  }

  void apply(Sample& s, SampleRng&) const override {
    const int h = s.img.height, w = s.img.width;
    const int top = std::max(0, py_round((h - height_) / 2.0));
    const int left = std::max(0, py_round((w - width_) / 2.0));
    const int bottom = std::min(h, top + height_);
    const int right = std::min(w, left + width_);
    s.img = crop(s.img, top, left, bottom - top, right - left);
  }

 private:
  int width_ = 0, height_ = 0;
};

// mmcv's RandomFlip: one direction with probability `prob`, or, with lists,
// direction i with prob[i] (a single prob shared evenly among the listed
// directions); none with the rest.
class RandomFlip : public Transform {
 public:
  enum class Direction { Horizontal, Vertical, Diagonal };

  explicit RandomFlip(const Node& cfg) {
    std::vector<Direction> dirs;
    auto parse = [](const Node& n) {
      const std::string& d = n.as_string();
      return d == "vertical"   ? Direction::Vertical
             : d == "diagonal" ? Direction::Diagonal
                               : Direction::Horizontal;
    };
    const Node* dir = cfg.find("direction");
    if (dir == nullptr) {
      dirs.push_back(Direction::Horizontal);
    } else if (dir->is_sequence()) {
      for (const auto& d : dir->seq_items()) dirs.push_back(parse(*d));
    } else {
      dirs.push_back(parse(*dir));
    }
    const Node* prob = cfg.find("prob");
    std::vector<double> probs;
    if (prob->is_sequence()) {
      for (const auto& p : prob->seq_items()) probs.push_back(p->as_double());
      if (probs.size() != dirs.size())
        throw ConfigError(prob->location(), prob->path(),
                          "expected one probability per direction (" + std::to_string(dirs.size()) +
                              "), got " + std::to_string(probs.size()));
    } else {
      probs.assign(dirs.size(), prob->as_double() / static_cast<double>(dirs.size()));
    }
    double total = 0;
    for (double p : probs) total += p;
    if (total > 1 + 1e-12)
      throw ConfigError(prob->location(), prob->path(),
                        "the probabilities add up to " + std::to_string(total) + " > 1");
    for (size_t i = 0; i < dirs.size(); ++i) choices_.emplace_back(dirs[i], probs[i]);
  }

  void apply(Sample& s, SampleRng& rng) const override {
    double u = rng.uniform();
    for (const auto& [dir, p] : choices_) {
      if (u < p) {
        flip(s.img, dir != Direction::Vertical, dir != Direction::Horizontal);
        return;
      }
      u -= p;
    }
  }

 private:
  std::vector<std::pair<Direction, double>> choices_;
};

}  // namespace

RandomResizedCrop::RandomResizedCrop(const Node& cfg) {
  const auto [h, w] = size_pair(*cfg.find("scale"));
  height_ = h;
  width_ = w;
  area_ = range_of(cfg, "crop_ratio_range", area_);
  ratio_ = range_of(cfg, "aspect_ratio_range", ratio_);
  if (const Node* n = cfg.find("max_attempts")) attempts_ = static_cast<int>(n->as_int());
  how_ = interpolation_of(cfg, Interpolation::Bilinear);
}

RandomResizedCrop::Box RandomResizedCrop::box(int h, int w, SampleRng& rng) const {
  const double area = static_cast<double>(h) * w;
  Box b;
  for (int i = 0; i < attempts_; ++i) {
    const double target_area = rng.uniform(area_.first, area_.second) * area;
    const double aspect = std::exp(rng.uniform(std::log(ratio_.first), std::log(ratio_.second)));
    b.width = py_round(std::sqrt(target_area * aspect));
    b.height = py_round(std::sqrt(target_area / aspect));
    if (0 < b.width && b.width <= w && 0 < b.height && b.height <= h) {
      b.top = static_cast<int>(rng.randint(0, h - b.height));
      b.left = static_cast<int>(rng.randint(0, w - b.width));
      return b;
    }
  }
  const double in_ratio = static_cast<double>(w) / h;
  if (in_ratio < ratio_.first) {
    b.width = w;
    b.height = py_round(b.width / ratio_.first);
  } else if (in_ratio > ratio_.second) {
    b.height = h;
    b.width = py_round(b.height * ratio_.second);
  } else {
    b.width = w;
    b.height = h;
  }
  b.top = (h - b.height) / 2;
  b.left = (w - b.width) / 2;
  return b;
}

Image RandomResizedCrop::resized(const Image& cropped) const {
  return resize(cropped, width_, height_, how_);
}

void RandomResizedCrop::apply(Sample& s, SampleRng& rng) const {
  const Box b = box(s.img.height, s.img.width, rng);
  s.img = resized(crop(s.img, b.top, b.left, b.height, b.width));
}

std::unique_ptr<Transform> make_random_resized_crop(const Node& cfg) {
  return std::make_unique<RandomResizedCrop>(cfg);
}
std::unique_ptr<Transform> make_resize_edge(const Node& cfg) {
  return std::make_unique<ResizeEdge>(cfg);
}
std::unique_ptr<Transform> make_center_crop(const Node& cfg) {
  return std::make_unique<CenterCrop>(cfg);
}
std::unique_ptr<Transform> make_random_flip(const Node& cfg) {
  return std::make_unique<RandomFlip>(cfg);
}

}  // namespace rh::data::image

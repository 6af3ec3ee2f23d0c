// rh/cpp/metric_names.hpp — the names of an event's metrics, kept across
// events, for hooks that keep the values to use later (the metrics hook
// formats its lines at a flush, the logger averages a window at each line).
//
// The events of a run carry the same names in the same order, event after
// event: keep the names once, then check each event against them in
// O(metrics) without allocating, and keep only its values.
//
//   if (!names_.same_as(e)) { use_what_is_kept(); names_.assign(e); }
//   for (size_t i = 0; i < e.num_metrics; ++i) values_.push_back(e.metrics[i].value);
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "rh/rh_plugin.h"

namespace rh {

inline std::string_view metric_name(const rh_Metric& m) { return {m.name.data, m.name.size}; }

class MetricNames {
 public:
  // Whether `e` carries exactly these names, in this order.
  bool same_as(const rh_HookEventArgs& e) const {
    if (size_ != e.num_metrics) return false;
    for (size_t i = 0; i < size_; ++i)
      if (names_[i] != metric_name(e.metrics[i])) return false;
    return true;
  }
  // Takes `e`'s names. The strings are kept and reused: names that come and
  // go (a metric sent every other event) allocate nothing once seen.
  void assign(const rh_HookEventArgs& e) {
    if (names_.size() < e.num_metrics) names_.resize(e.num_metrics);
    size_ = e.num_metrics;
    for (size_t i = 0; i < size_; ++i) names_[i].assign(metric_name(e.metrics[i]));
  }
  size_t size() const { return size_; }
  const std::string& operator[](size_t i) const { return names_[i]; }

 private:
  std::vector<std::string> names_;  // the first size_ are the names
  size_t size_ = 0;
};

}  // namespace rh

// DeepSpeedKeys — what the zero strategy's configuration reader knows of
// DeepSpeed's keys beyond the ones it reads (internal to rh_zero_core): the
// keys that are job keys in runner-host, the settings zero implements one
// way only (accepted with the value that asks for what zero does, refused
// with any other, naming what that value asks for and what zero does
// instead), DeepSpeed's field-name synonyms, the sections switched by
// `enabled`, and the keys zero does not implement in any value. Tables
// only; ZeroConfig.cpp's validator applies them. No LibTorch here.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "ZeroConfigView.hpp"

namespace rh::zero::detail {

// DeepSpeed keys that are job keys in runner-host (key -> the job key to
// set). "auto" (Hugging Face's placeholder for the trainer's value) is
// accepted: the job's value is the one runner-host uses.
const std::map<std::string, std::string>& job_keys();

// A DeepSpeed setting that runner-host's zero implements one way only: a
// value asking for that way is accepted (read; there is nothing to change),
// any other value is refused naming what it asks for and what zero does.
struct OneWay {
  std::function<bool(const View&)> matches;  // throws the value's type error
  std::string accepted;                      // what may be written: "false", "0"
  std::string asks;                          // what another value asks for
  std::string does;                          // what zero does instead
  bool default_matches = true;               // DeepSpeed's default (what "auto" gives)
};

using OneWayTable = std::map<std::string, OneWay>;

// Per section: zero_optimization, fp16, bf16, the top level.
const OneWayTable& one_way_zero_keys();
const OneWayTable& one_way_fp16_keys();
const OneWayTable& one_way_bf16_keys();
const OneWayTable& one_way_top_keys();

// zero_optimization's keys under DeepSpeed's field names (its config model
// accepts both): written name -> the key zero reads.
const std::map<std::string, std::string>& zero_synonyms();

// Top-level DeepSpeed sections switched by `enabled` (default false): off,
// they ask for nothing (their other keys have no effect, as in DeepSpeed);
// on, they ask for what is named here.
const std::map<std::string, std::string>& switched_sections();

// DeepSpeed keys runner-host knows and does not implement in any value,
// with a hint where there is something to say.
using HintTable = std::map<std::string, std::string>;
const HintTable& unimplemented_top_keys();

}  // namespace rh::zero::detail

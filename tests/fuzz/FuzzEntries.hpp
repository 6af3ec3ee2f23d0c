// The fuzz targets' entry functions: one per parser, each feeding arbitrary
// bytes to the parser the way the host would meet them (a job file and --set
// arguments, a safetensors header, a checkpoint's meta.json, a data file, the
// struct a plugin's entry symbol returns).
//
// An entry returns normally when the parser accepts the input or rejects it
// with its documented error type (ConfigError, HostError, rh::Exception).
// Anything else is a bug: another exception escapes, or the entry aborts
// after printing which invariant broke. The libFuzzer targets
// (tests/fuzz/libfuzzer/) and the regression test that replays
// tests/fuzz/regressions/<target>/ in the ordinary suite call these same
// functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rh::fuzz {

// Input: a job file; each line after a line "#--set" is one --set argument
// (key.path=value). The job may include "base.yaml" (a small valid base the
// entry provides). Loads, validates against the job schema, and checks that
// the --print-config output reads back to the same text.
void job_config(const uint8_t* data, size_t size);

// Input: 8 bytes (little-endian file size), then the JSON header.
void safetensors_header(const uint8_t* data, size_t size);

// Input: the bytes of meta.json, read by checkpoint::read_meta.
void checkpoint_meta(const uint8_t* data, size_t size);

// Input: a struct description (tests/fuzz/PluginInfoFuzz.cpp says how bytes
// map to fields): an rh_PluginInfo with hostile sizes, counts and strings,
// laid out honestly in memory, checked by host::read_plugin_info.
void plugin_info(const uint8_t* data, size_t size);

// LibTorch-backed readers (FuzzDataEntries.cpp).
// Input: byte 0 selects options (bit 0: header, bit 1: ';' delimiter,
// bit 2: label column by name "label", bit 3: label column -1); the rest is
// the CSV file.
void csv_dataset(const uint8_t* data, size_t size);
// Input: 4 bytes (little-endian length n of the image file), the image file
// (n bytes, fewer if the input ends), the label file (the rest).
void mnist_dataset(const uint8_t* data, size_t size);
// Input: the test_batch.bin file.
void cifar10_dataset(const uint8_t* data, size_t size);

// A private directory for the files an entry writes, created on first use
// and removed at exit.
const std::string& scratch_dir();
// Writes `bytes` to `path` (throws std::runtime_error when it cannot).
void write_file(const std::string& path, const uint8_t* data, size_t size);

}  // namespace rh::fuzz

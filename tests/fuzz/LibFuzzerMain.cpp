// One libFuzzer target: RH_FUZZ_ENTRY names the entry function
// (FuzzEntries.hpp) this binary fuzzes.
#include "FuzzEntries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rh::fuzz::RH_FUZZ_ENTRY(data, size);
  return 0;
}

// Preloaded (LD_PRELOAD) only under valgrind by step_instructions.sh.
//
// Debian's LibTorch links libhwy (Highway), whose static initialiser calls
// hwy::platform::TimerResolution(), which executes RDTSCP. On a CPU that does
// not advertise RDTSCP (this VM's, under its hypervisor) valgrind refuses the
// instruction and kills the process before main. Highway uses these two
// functions only for its own benchmark timers; nothing runner-host or
// LibTorch computes depends on them.
#include <cstdint>

namespace hwy::platform {
uint64_t TimerResolution() { return 1; }
double InvariantTicksPerSecond() { return 1e9; }
}  // namespace hwy::platform

#include "launch/StopSignal.hpp"

#include <signal.h>

#include <atomic>

namespace rh::launch {
namespace {

// Process-wide by nature: a signal handler has no other place to write.
std::atomic<int> g_accepting{0};
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "used from a signal handler");

void on_stop_signal(int sig) {
  int expected = 0;
  if (g_accepting.load() > 0 && g_signal.compare_exchange_strong(expected, sig)) return;
  // Not accepted now, or a second signal: the default action (termination).
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a blocked read or collective goes on
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGUSR1, &sa, nullptr);
}

int stop_signal() { return g_signal.load(); }

StopSignalScope::StopSignalScope() { g_accepting.fetch_add(1); }
StopSignalScope::~StopSignalScope() { g_accepting.fetch_sub(1); }

}  // namespace rh::launch

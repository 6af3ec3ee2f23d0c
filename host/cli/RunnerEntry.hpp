// The entry point of the runner library (librh_runner.so), which the
// runner-host program loads with dlopen for everything but the launcher.
//
// Why a library: LibTorch's start-up (registering its operators, and the
// ~290 shared libraries Debian's build pulls in) costs ~0.75 s and ~150 MB
// of resident memory per process. The launcher (`--nproc-per-node N`) only
// starts and watches its workers, so the program that runs it does not link
// LibTorch; the workers, and every single-process run, load this library.
#pragma once

#include <cstddef>

namespace rh::launch {
class ElasticAgent;
struct ElasticAgentOptions;
}  // namespace rh::launch

// The symbols runner-host looks up in the library.
#define RH_RUNNER_MAIN_SYMBOL "rh_runner_main"
#define RH_ELASTIC_AGENT_SYMBOL "rh_elastic_agent"

extern "C" {
// Runs the whole program for argv (the same argv runner-host got) and
// returns its exit code. The caller has already applied the heap and thread
// policies (`heap_policy`: what they did, for the debug log, "heap: ...;
// threads: ..."; borrowed, may be "") and
// installed the "runner-host" spdlog logger as the default one.
typedef int (*rh_RunnerMainFn)(int argc, char** argv, const char* heap_policy);
int rh_runner_main(int argc, char** argv, const char* heap_policy);

// The launcher's elastic rendezvous (--max-restarts; launch/ElasticAgent.hpp),
// which needs c10d's store and so lives here: the launcher loads the library
// only when it is elastic. Returns a new agent (the caller owns it; it was
// built by this same build of runner-host, so the C++ object crosses the
// boundary safely), or NULL with the reason in error[0..error_size).
typedef rh::launch::ElasticAgent* (*rh_ElasticAgentFn)(const rh::launch::ElasticAgentOptions* o,
                                                       char* error, size_t error_size);
rh::launch::ElasticAgent* rh_elastic_agent(const rh::launch::ElasticAgentOptions* o, char* error,
                                           size_t error_size);
}

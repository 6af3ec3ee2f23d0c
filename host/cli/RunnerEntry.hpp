// The entry point of the runner library (librh_runner.so), which the
// runner-host program loads with dlopen for everything but the launcher.
//
// Why a library: LibTorch's start-up (registering its operators, and the
// ~290 shared libraries Debian's build pulls in) costs ~0.75 s and ~150 MB
// of resident memory per process. The launcher (`--nproc-per-node N`) only
// starts and watches its workers, so the program that runs it does not link
// LibTorch; the workers, and every single-process run, load this library.
#pragma once

// The symbol runner-host looks up in the library.
#define RH_RUNNER_MAIN_SYMBOL "rh_runner_main"

extern "C" {
// Runs the whole program for argv (the same argv runner-host got) and
// returns its exit code. The caller has already applied the heap policy
// (`heap_policy`: what it did, for the debug log; borrowed, may be "") and
// installed the "runner-host" spdlog logger as the default one.
typedef int (*rh_RunnerMainFn)(int argc, char** argv, const char* heap_policy);
int rh_runner_main(int argc, char** argv, const char* heap_policy);
}

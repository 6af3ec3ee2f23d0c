// rh_elastic_agent (RunnerEntry.hpp): the launcher's elastic rendezvous,
// made in the runner library because it stands on c10d's TCPStore.
#include <cstdio>
#include <exception>

#include "cli/RunnerEntry.hpp"
#include "comm/ElasticRendezvous.hpp"

extern "C" rh::launch::ElasticAgent* rh_elastic_agent(const rh::launch::ElasticAgentOptions* o,
                                                      char* error, size_t error_size) {
  try {
    return rh::comm::make_elastic_agent(*o).release();
  } catch (const std::exception& e) {
    if (error != nullptr && error_size > 0) std::snprintf(error, error_size, "%s", e.what());
    return nullptr;
  }
}

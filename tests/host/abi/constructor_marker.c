/* constructor_marker.c — a hook plugin whose library constructor leaves a
 * trace: when RH_TEST_CONSTRUCTOR_MARKER names a file, loading the library
 * (dlopen runs constructors before the host sees rh_plugin_info) appends a
 * line to it. The host tests use it to prove which libraries a job opens:
 * one it does not use must never be opened.
 *
 * Type `marker`: the counting hook of the ABI test plugins.
 */
#include <stdio.h>
#include <stdlib.h>

#include "test_hook.h"

__attribute__((constructor)) static void constructor_marker_loaded(void) {
  const char* path = getenv("RH_TEST_CONSTRUCTOR_MARKER");
  FILE* marker;
  if (path == NULL || path[0] == '\0') return;
  marker = fopen(path, "a");
  if (marker == NULL) return;
  fputs("constructor ran\n", marker);
  fclose(marker);
}

static const rh_HookVtable kVtable = TEST_HOOK_VTABLE_INIT;

static const rh_Component kComponents[] = {
    TEST_HOOK_COMPONENT("marker", "writes a marker file when its library is loaded", &kVtable)};

static const rh_PluginInfo kInfo = {RH_PLUGIN_INFO_STRUCT_SIZE,
                                    RH_ABI_VERSION_MAJOR,
                                    RH_ABI_VERSION_MINOR,
                                    RH_STR("rh_test_constructor_marker"),
                                    RH_STR("0.1.0"),
                                    RH_NATIVE_TAG_NONE,
                                    kComponents,
                                    1,
                                    NULL,
                                    NULL};

RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major, uint32_t host_abi_minor) {
  (void)host_abi_major;
  (void)host_abi_minor;
  return &kInfo;
}

/* null_info.c — rh_plugin_info returns NULL: the plugin declines to work
 * with this host. The host must report it as refused (naming the path), not
 * crash, and keep going with the other plugins of --list-plugins.
 */
#include "rh/rh_plugin.h"

RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major, uint32_t host_abi_minor) {
  (void)host_abi_major;
  (void)host_abi_minor;
  return NULL;
}

/* not_a_plugin.c — an ordinary shared library with no rh_plugin_info (a
 * stray .so in a plugin directory). The host must report it as "not a
 * runner-host plugin" (naming the path and the missing symbol) and go on.
 */
__attribute__((visibility("default"))) int rh_test_not_a_plugin_answer(void);

int rh_test_not_a_plugin_answer(void) { return 42; }

/* AbiLayoutTest.c — abi_layout_asserts.h compiled as C11: if this file
 * compiles, the C compiler lays out every public struct as pinned. */
#include "abi_layout_asserts.h"

int main(void) { return 0; }

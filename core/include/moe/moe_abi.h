/* The C ABI moved to moe/abi/moe_abi.h in ABI 1.2; this name stays for sources written against
 * 1.1. New code includes moe/abi/moe_abi.h. */
#include "moe/abi/moe_abi.h"

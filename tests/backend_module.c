// backend_module.c: stand-ins for a backend module (libmtac_cuda.so) for test_backend_module, built
// by CMakeLists.txt four ways: MODULE_RIGHT (this build's ABI), MODULE_STALE (another ABI
// number), MODULE_UNBUMPED (this ABI number, but an mta_ctx of another size: a change made without
// the bump) and MODULE_NONE (no mtac_backend_abi: a module from before the check).
#include "attn/mta_internal.h"

#define EXPORT __attribute__((visibility("default")))

#if defined(MODULE_RIGHT)
EXPORT const mta_module_abi mtac_backend_abi = MTA_MODULE_ABI;
#elif defined(MODULE_STALE)
EXPORT const mta_module_abi mtac_backend_abi = {MTA_BACKEND_ABI + 1, sizeof(mta_ctx), sizeof(mta_config),
                                                sizeof(mta_backend_impl), MTA_N_USES};
#elif defined(MODULE_UNBUMPED)
EXPORT const mta_module_abi mtac_backend_abi = {MTA_BACKEND_ABI, sizeof(mta_ctx) + 8, sizeof(mta_config),
                                                sizeof(mta_backend_impl), MTA_N_USES};
#endif

static int stand_in_available(void) { return 1; }

EXPORT const mta_backend_impl mta_test_backend = {.available = stand_in_available};

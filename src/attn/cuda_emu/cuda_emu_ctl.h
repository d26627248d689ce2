// cuda_emu_ctl.h: the CUDA emulator's settings, for the tests (C and C++).
#ifndef MTAC_CUDA_EMU_CTL_H
#define MTAC_CUDA_EMU_CTL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The thread and block orders (cuda_emu.h): pass p of launch l of a block runs its threads in order
// when (p + l + schedule) % 3 is 0, reversed when 1, in a shuffle seeded by (schedule, l, block, p)
// when 2; blocks likewise with p = 0. Schedules 0, 1 and 2 start each launch with a different one
// of the three orders. Default 0.
void mta_cuda_emu_set_schedule(uint64_t schedule);
// Kernel launches so far, in this process.
uint64_t mta_cuda_emu_launches(void);

#ifdef __cplusplus
}
#endif
#endif

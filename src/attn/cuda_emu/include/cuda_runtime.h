// cuda_runtime.h of the CUDA emulator (cuda_emu.h): what a CUDA source includes gets the emulated
// runtime when compiled for the cuda-emu backend.
#include "attn/cuda_emu/cuda_emu.h"

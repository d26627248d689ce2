// mta_cuda_emu.cpp: the cuda-emu backend: the CUDA backend's own source (mta_cuda.cu and
// cuda_kernels.cuh), compiled by the host C++ compiler against the CUDA emulator (cuda_emu.h,
// whose include/ directory stands in for the toolkit's headers). See docs/cuda.md.
#define MTAC_CUDA_EMU 1
#include "attn/mta_cuda.cu"

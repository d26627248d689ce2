// cuda_emu_ptx_nvcc.cu: the kernels test_cuda_emu.cpp runs in the CUDA emulator (cuda_emu_ptx.cuh),
// compiled by nvcc to show they are valid CUDA (not built by CMake; no GPU needed):
//   nvcc -arch=sm_90 -std=c++17 -I src -c tests/cuda_emu_ptx_nvcc.cu -o /tmp/cuda_emu_ptx.o
#include "cuda_emu_ptx.cuh"

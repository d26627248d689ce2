// cluster_probe_emu.cpp: the GPU bundle's cluster probe (scripts/gpu_check/cluster_probe.cu) compiled
// by the host C++ compiler against the CUDA emulator, as the cuda-emu backend is: CTest runs it
// with tiny sizes (test_cluster_probe_emu), so its all-gather and verify pass are checked without a
// GPU; its times there measure the emulator, not a GPU.
#define MTAC_CUDA_EMU 1
#include "../scripts/gpu_check/cluster_probe.cu"

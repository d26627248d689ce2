// gpu_probe.cu: says whether this machine has a GPU that the CUDA runtime the project was built
// with can use, and why not when it cannot. Built by `scripts/gpu_check.sh prepare` (with the CUDA
// runtime linked statically, so it needs only the driver) and run first by gpu-bundle/run.sh.
// Prints the runtime's and the driver's CUDA versions and each device's name, compute capability,
// memory and multiprocessor count. Exit 0: at least one device of compute capability >= 9.0 (what
// the bundle is built for: sm_90); 77: no usable device (the message says why); 1: a device too
// old for sm_90 code.
#include <cuda_runtime.h>
#include <stdio.h>

static void version(const char *what, int v) { printf("%s CUDA %d.%d\n", what, v / 1000, v % 1000 / 10); }

int main(void) {
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    version("runtime (built with):", rt);
    const cudaError_t de = cudaDriverGetVersion(&drv);
    if (de != cudaSuccess || drv == 0) {
        printf("driver: none loaded (libcuda.so.1 missing: no NVIDIA driver on this machine)\n");
        return 77;
    }
    version("driver supports:     ", drv);
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        printf("cudaGetDeviceCount: %s (%s)\n", cudaGetErrorString(e), cudaGetErrorName(e));
        if (drv < rt)
            printf("the driver supports CUDA %d.%d, older than the runtime this bundle was built with (%d.%d): "
                   "a newer driver is needed\n",
                   drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
        return 77;
    }
    if (n == 0) {
        printf("no CUDA device\n");
        return 77;
    }
    int best = 0;
    for (int i = 0; i < n; i++) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        printf("device %d: %s, compute capability %d.%d, %.1f GiB, %d multiprocessors\n", i, p.name, p.major, p.minor,
               p.totalGlobalMem / 1073741824.0, p.multiProcessorCount);
        if (p.major * 10 + p.minor > best) best = p.major * 10 + p.minor;
    }
    if (best < 90) {
        printf("no device of compute capability 9.0 or newer: the bundle holds sm_90 code only\n");
        return 1;
    }
    return 0;
}

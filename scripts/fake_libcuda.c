/* A stand-in for NVIDIA's driver library (libcuda.so) with which Taichi 1.7.4 starts its CUDA
   backend on a machine without a GPU, so that it generates the PTX of every kernel it compiles:
   scripts/cuda_registers.py builds it and hands that PTX to ptxas. Every call succeeds: the
   device reports compute capability 9.0 and 132 multiprocessors (an H100 or H200), memory is
   the host's, copies are memcpy and launches do nothing, so kernels compile but compute
   nothing. cuModuleLoadDataEx writes each module's PTX to $FAKECUDA_PTX_DIR. Only the driver
   functions Taichi 1.7.4 resolves are defined; those it never calls for ndarray kernels fail. */
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stdio.h>
typedef int CUresult;
CUresult cuInit(unsigned int f) { return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 12040; return 0; }
CUresult cuDeviceGetCount(int *c) { *c = 1; return 0; }
CUresult cuDeviceGet(int *d, int o) { *d = 0; return 0; }
CUresult cuDeviceGetName(char *n, int len, int d) { strncpy(n, "no GPU (scripts/fake_libcuda.c)", len); return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
  switch (attr) {
    case 75: *v = 9; break;   /* compute capability major */
    case 76: *v = 0; break;   /* minor */
    case 16: *v = 132; break; /* multiprocessor count */
    case 1: *v = 1024; break; /* max threads per block */
    case 39: *v = 2048; break;/* max threads per SM */
    case 10: *v = 32; break;  /* warp size */
    case 8: *v = 49152; break;  /* shared memory per block */
    case 12: *v = 65536; break; /* registers per block */
    default: *v = 1; break;
  }
  return 0;
}
CUresult cuDeviceGetDefaultMemPool(void **p, int d) { static int pool; *p = &pool; return 0; }
CUresult cuMemPoolSetAttribute(void *p, int a, void *v) { return 0; }
static int ctx_obj;
CUresult cuCtxCreate_v2(void **c, unsigned int f, int d) { *c = &ctx_obj; return 0; }
CUresult cuCtxSetCurrent(void *c) { return 0; }
CUresult cuCtxGetCurrent(void **c) { *c = &ctx_obj; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { *c = &ctx_obj; return 0; }
CUresult cuCtxSetLimit(int l, size_t v) { return 0; }
static int stream_obj;
CUresult cuStreamCreate(void **s, unsigned int f) { *s = &stream_obj; return 0; }
CUresult cuStreamSynchronize(void *s) { return 0; }
CUresult cuMemcpyHtoD_v2(void *d, const void *s, size_t n) { memcpy(d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, const void *s, size_t n) { memcpy(d, s, n); return 0; }
CUresult cuMemcpyDtoD_v2(void *d, const void *s, size_t n) { memmove(d, s, n); return 0; }
CUresult cuMemcpyHtoDAsync_v2(void *d, const void *s, size_t n, void *st) { memcpy(d, s, n); return 0; }
CUresult cuMemcpyDtoHAsync_v2(void *d, const void *s, size_t n, void *st) { memcpy(d, s, n); return 0; }
CUresult cuMemAlloc_v2(void **p, size_t n) { *p = calloc(1, n ? n : 1); return *p ? 0 : 2; }
CUresult cuMemAllocAsync(void **p, size_t n, void *s) { return cuMemAlloc_v2(p, n); }
CUresult cuMemAllocManaged(void **p, size_t n, unsigned int f) { return cuMemAlloc_v2(p, n); }
CUresult cuMemFree_v2(void *p) { return 0; }
CUresult cuMemFreeAsync(void *p, void *s) { return 0; }
CUresult cuMemsetD8_v2(void *p, unsigned char v, size_t n) { memset(p, v, n); return 0; }
CUresult cuMemsetD32_v2(void *p, unsigned int v, size_t n) { uint32_t *q = p; for (size_t i = 0; i < n; i++) q[i] = v; return 0; }
CUresult cuMemAdvise(void *p, size_t n, int a, int d) { return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = (size_t)8 << 30; *t = (size_t)16 << 30; return 0; }
CUresult cuPointerGetAttribute(void *data, int attr, void *ptr) { memset(data, 0, 8); return 0; }
static int module_obj, func_obj;
CUresult cuModuleLoadDataEx(void **m, const void *img, unsigned int n, void *o, void **v) {
  const char *dir = getenv("FAKECUDA_PTX_DIR");
  static int count;
  if (dir) {
    char path[4096]; snprintf(path, sizeof path, "%s/module_%04d.ptx", dir, count++);
    FILE *f = fopen(path, "w"); if (f) { fputs((const char *)img, f); fclose(f); }
  }
  *m = &module_obj; return 0;
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { *f = &func_obj; return 0; }
CUresult cuLaunchKernel(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g, unsigned sh, void *st, void **p, void **x) { return 0; }
CUresult cuFuncGetAttribute(int *v, int a, void *f) { *v = 0; return 0; }
CUresult cuFuncSetAttribute(void *f, int a, int v) { return 0; }
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int b, size_t s) { *n = 2; return 0; }
CUresult cuEventCreate(void **e, unsigned int f) { static int ev; *e = &ev; return 0; }
CUresult cuEventDestroy(void *e) { return 0; }
CUresult cuEventRecord(void *e, void *s) { return 0; }
CUresult cuEventSynchronize(void *e) { return 0; }
CUresult cuEventElapsedTime(float *t, void *a, void *b) { *t = 0; return 0; }
CUresult cuGetErrorName(CUresult e, const char **s) { *s = "CUDA_ERROR_FAKE"; return 0; }
CUresult cuGetErrorString(CUresult e, const char **s) { *s = "fake"; return 0; }
#define UNUSED(name) CUresult name(void) { return 1; }
UNUSED(cuImportExternalMemory) UNUSED(cuExternalMemoryGetMappedBuffer)
UNUSED(cuExternalMemoryGetMappedMipmappedArray) UNUSED(cuMipmappedArrayGetLevel)
UNUSED(cuSurfObjectCreate) UNUSED(cuSignalExternalSemaphoresAsync)
UNUSED(cuWaitExternalSemaphoresAsync) UNUSED(cuImportExternalSemaphore)

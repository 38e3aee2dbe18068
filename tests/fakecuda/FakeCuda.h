/* FakeCuda.h - a fake CUDA driver for host-only tests (no GPU).
 *
 * libdeltac_fakecuda.so implements the driver entry points the generated
 * runtime resolves (templates/runtime/deltac_runtime.cpp) and records what
 * it is asked to do. A test points the runtime at it with
 * deltac_rt::useDriverLibrary(path) before the first call, links it to
 * reach the control functions below, and then reads back every load and
 * launch. It never touches "device" memory, except that cuMemcpyDtoHAsync
 * copies from memory the test registered (fakecuda_register_memory) and
 * fails with CUDA_ERROR_INVALID_VALUE (1) for any other range, as a driver
 * does for an address that is not device memory. */
#ifndef DELTAC_FAKECUDA_H
#define DELTAC_FAKECUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Forgets launches, memsets, copies and registered memory (not the loaded
 * kernels: the runtime keeps its handles). */
void fakecuda_reset(void);
/* The device the fake reports (default: 9.0, 132 SMs, 227 KiB opt-in
 * shared memory per block, 228 KiB per SM). */
void fakecuda_set_device(int major, int minor, int sms, int sharedOptin,
                         int sharedPerSM);
/* Host memory standing in for device memory that cuMemcpyDtoHAsync may
 * read. */
void fakecuda_register_memory(const void *base, size_t bytes);

/* Called on the launching thread for every launch, with the kernel's name
 * and the kernelParams array (valid only during the call). */
typedef void (*fakecuda_launch_hook)(const char *kernel, const unsigned grid[3],
                                     unsigned block, unsigned sharedBytes,
                                     void **params, void *user);
void fakecuda_set_launch_hook(fakecuda_launch_hook hook, void *user);

int fakecuda_launches(void);        /* cuLaunchKernel(Ex) calls */
int fakecuda_memsets(void);         /* cuMemsetD32Async calls */
int fakecuda_copies(void);          /* successful cuMemcpyDtoHAsync calls */
int fakecuda_library_loads(void);   /* cuLibraryLoadData calls, ever */
/* The name of launch i since the last reset ("" past the end; the first 64
 * are kept). */
const char *fakecuda_launch_name(int i);
/* cuLibraryGetKernel calls for a name already looked up (a kernel loaded
 * twice), ever. */
int fakecuda_kernels_loaded_twice(void);
/* Microseconds cuLibraryLoadData sleeps (widens races for ThreadSanitizer). */
void fakecuda_set_load_delay_us(int us);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DELTAC_FAKECUDA_H */

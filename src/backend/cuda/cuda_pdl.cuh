/* Programmatic dependent launch (PDL), shared by our kernels (cuda_device.h) and the CUTLASS
 * grouped GEMMs (cutlass/grouped_sm90.cuh), which do not need the rest of cuda_device.h.
 * Needs cuda_backend.h (gln_cuda_pdl_enabled) first. */
#ifndef GLN_BACKEND_CUDA_PDL_CUH
#define GLN_BACKEND_CUDA_PDL_CUH

#ifndef __CUDACC__
#error "cuda_pdl.cuh is for CUDA sources only"
#endif

#include <cuda_runtime.h>

/* A kernel launched by gln_cuda_launch may be scheduled while the kernel before it on the stream
 * is still running, so that its launch and its blocks' arrival overlap the previous kernel's last
 * tiles instead of following its completion.  Such a kernel calls gln_pdl_wait() before its first
 * access to global memory other than its parameters: the wait returns once every earlier kernel
 * of the stream has completed and its writes are visible (without PDL it returns at once).  Then
 * gln_pdl_launch_dependents() lets the next PDL kernel be scheduled: after the wait, so that at
 * most one kernel waits ahead of the running one. */
__device__ __forceinline__ void gln_pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void gln_pdl_launch_dependents(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Launch kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream serialization
 * when `pdl`: for kernels that begin with gln_pdl_wait(). */
template <class... Params, class... Args>
static cudaError_t gln_cuda_launch_pdl(bool pdl, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                       cudaStream_t stream, Args &&...args) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<Args &&>(args)...);
}

/* The same with PDL unless GLN_CUDA_PDL=0. */
template <class... Params, class... Args>
static cudaError_t gln_cuda_launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                   Args &&...args) {
    return gln_cuda_launch_pdl(gln_cuda_pdl_enabled() != 0, kernel, grid, block, smem, stream,
                               static_cast<Args &&>(args)...);
}

#endif

/* Page-locked staging memory and the capture query of a CUDA context (cuda_host_stage.h). */
#include "backend/cuda/cuda_host_stage.h"

#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/context.h"
#include "common/error.h"

gln_status_t gln_cuda_host_alloc(gln_context_t *ctx, size_t bytes, void **ptr) {
    static const char *fn = "grouplin (cuda): staging buffer";
    *ptr = NULL;
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    /* the device current when the memory is registered: the one the copies run on */
    GLN_TRY(gln_cuda_check(cudaSetDevice(ctx->device), fn, "cudaSetDevice"));
    cudaError_t err = cudaMallocHost(ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *ptr = NULL;
        return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of page-locked host memory",
                        fn, bytes);
    }
    return gln_cuda_check(err, fn, "cudaMallocHost");
}

void gln_cuda_host_free(gln_context_t *ctx, void *ptr) {
    (void)ctx;
    if (ptr) (void)cudaFreeHost(ptr);
}

gln_status_t gln_cuda_stream_capturing(gln_context_t *ctx, int *capturing) {
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    GLN_TRY(gln_cuda_check(cudaStreamIsCapturing(gln_cuda_state(ctx)->stream, &cap),
                           "grouplin (cuda): capture query", "cudaStreamIsCapturing"));
    /* an invalidated capture is still one: synchronizing now would not help it either */
    *capturing = cap != cudaStreamCaptureStatusNone;
    return GLN_STATUS_SUCCESS;
}

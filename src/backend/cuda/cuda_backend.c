/* The CUDA backend's ops table, initialization, memory and error translation.
 *
 * init picks ctx->device, creates the context's stream, a cuBLASLt handle, its workspace and the
 * small per-context buffers of the kernels.  Without any device it fails with
 * GLN_STATUS_NOT_SUPPORTED ("no CUDA device") so gln_context_create reports it cleanly.
 *
 * The MXFP8 scale swizzle is not implemented yet (cuBLASLt cannot run MXFP8 on sm_90, so
 * nothing here needs swizzled scales): its slot is NULL and the dispatcher reports
 * NOT_SUPPORTED.  The MoE slots (router, permutation, activations) are in cuda_moe.cu;
 * cuda_supports.c answers gln_backend_supports for the rest. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_moe.h"
#include "backend/cuda/cuda_dist.h"
#include "backend/cuda/cuda_host_stage.h"
#include "backend/cuda/cuda_optimizer.h"
#include "common/error.h"

int gln_cuda_device_present(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the error so later calls start clean */
        return 0;
    }
    return count > 0;
}

gln_status_t gln_cuda_check(cudaError_t err, const char *call, const char *what) {
    if (err == cudaSuccess) return GLN_STATUS_SUCCESS;
    (void)cudaGetLastError(); /* non-sticky errors must not poison the next call */
    return gln_fail(GLN_STATUS_BACKEND_ERROR, "%s: %s failed: %s: %s", call, what, cudaGetErrorName(err),
                    cudaGetErrorString(err));
}

int64_t gln_cuda_env_grid_cap(const char *name) {
    const char *e = getenv(name);
    const long long n = e ? strtoll(e, NULL, 10) : 0;
    return n > 0 ? (int64_t)n : 0;
}

gln_status_t gln_cuda_persistent_grid(const void *kernel, int threads, size_t smem, int one_per_sm, int64_t items,
                                      int64_t cap, const char *call, int64_t *blocks) {
    int dev = 0, sms = 0, per_sm = 0;
    GLN_TRY(gln_cuda_check(cudaGetDevice(&dev), call, "cudaGetDevice"));
    GLN_TRY(gln_cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), call,
                           "cudaDeviceGetAttribute(multiprocessors)"));
    GLN_TRY(gln_cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem), call,
                           "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
    *blocks = (int64_t)(sms > 0 ? sms : 1) * (per_sm > 0 && !one_per_sm ? per_sm : 1);
    if (cap > 0 && *blocks > cap) *blocks = cap;
    if (*blocks > items) *blocks = items;
    return GLN_STATUS_SUCCESS;
}

int gln_cuda_env_switch(const char *name) {
    const char *e = getenv(name);
    return !(e && e[0] == '0');
}

int gln_cuda_pdl_enabled(void) { return gln_cuda_env_switch("GLN_CUDA_PDL"); }

gln_status_t gln_cublas_check(cublasStatus_t status, const char *call, const char *what) {
    if (status == CUBLAS_STATUS_SUCCESS) return GLN_STATUS_SUCCESS;
    return gln_fail(GLN_STATUS_BACKEND_ERROR, "%s: %s failed: %s: %s", call, what,
                    cublasLtGetStatusName(status), cublasLtGetStatusString(status));
}

gln_status_t gln_cuda_check_launch(const char *call, const char *kernel) {
    return gln_cuda_check(cudaGetLastError(), call, kernel);
}

gln_status_t gln_cuda_scratch_alloc(gln_context_t *ctx, size_t bytes, void **ptr, const char *call) {
    *ptr = NULL;
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    if (ctx->alloc) {
        *ptr = ctx->alloc(bytes, (void *)stream, ctx->alloc_user);
        if (!*ptr)
            return gln_fail(GLN_STATUS_OUT_OF_MEMORY,
                            "%s: the context's allocator returned NULL for %zu bytes of device scratch", call, bytes);
        return GLN_STATUS_SUCCESS;
    }
    cudaError_t err = cudaMallocFromPoolAsync(ptr, bytes, gln_cuda_state(ctx)->pool, stream);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *ptr = NULL;
        return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of device scratch", call,
                        bytes);
    }
    return gln_cuda_check(err, call, "cudaMallocFromPoolAsync");
}

void gln_cuda_scratch_free(gln_context_t *ctx, void *ptr) {
    if (!ptr) return;
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    if (ctx->free)
        ctx->free(ptr, (void *)stream, ctx->alloc_user);
    else
        (void)cudaFreeAsync(ptr, stream);
}

gln_status_t gln_cuda_host_splits(gln_context_t *ctx, const char *call, const char *name,
                                  const gln_grouped_tensor_t *g, int64_t **host_splits) {
    gln_status_t st = GLN_STATUS_SUCCESS;
    const size_t bytes = (size_t)g->num * sizeof(int64_t); /* num is an int32 >= 1 */
    int64_t *h = malloc(bytes);
    *host_splits = NULL;
    GLN_CHECK_COND(st, fail, h != NULL, GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", call);
    if (g->splits_on_backend) {
        /* Reading device splits needs the stream drained: refused inside a graph capture (a
         * synchronization there would invalidate the caller's capture), with a message saying
         * which call still needs the host splits. */
        cudaStream_t s = gln_cuda_state(ctx)->stream;
        enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
        GLN_CHECK(st, fail, gln_cuda_check(cudaStreamIsCapturing(s, &cap), call, "cudaStreamIsCapturing"));
        GLN_CHECK_COND(st, fail, cap == cudaStreamCaptureStatusNone, GLN_STATUS_NOT_SUPPORTED,
                                 "%s: %s has its splits on the device, and this operation still runs a per-expert "
                                 "loop that reads them on the host: it cannot run inside a CUDA graph capture",
                                 call, name);
        GLN_CHECK(st, fail, gln_cuda_check(cudaMemcpyAsync(h, g->splits, bytes, cudaMemcpyDeviceToHost, s), call,
                                           "cudaMemcpyAsync(splits)"));
        GLN_CHECK(st, fail, gln_cuda_check(cudaStreamSynchronize(s), call, "cudaStreamSynchronize"));
    } else {
        memcpy(h, g->splits, bytes);
    }
    /* Device splits could not be checked at the boundary: check them here.  packed.rows is
     * within GLN_MAX_DIM (checked at the boundary) and the running sum never passes it, so the
     * sum cannot overflow whatever the device held. */
    int64_t sum = 0;
    for (int32_t i = 0; i < g->num; i++) {
        GLN_CHECK_COND(st, fail, h[i] >= 0, GLN_STATUS_INVALID_ARGUMENT, "%s: %s->splits[%d] = %lld must be >= 0",
                                 call, name, (int)i, (long long)h[i]);
        GLN_CHECK_COND(st, fail, h[i] <= g->packed.rows - sum, GLN_STATUS_INVALID_ARGUMENT,
                                 "%s: %s splits sum exceeds packed.rows %lld (at member %d: %lld)", call, name,
                                 (long long)g->packed.rows, (int)i, (long long)h[i]);
        sum += h[i];
    }
    *host_splits = h;
    return GLN_STATUS_SUCCESS;
fail:
    free(h);
    return st;
}

/* ---- init / fini -------------------------------------------------------------------------- */

static void cuda_fini(gln_context_t *ctx) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    if (!s) return;
    if (s->stream) (void)cudaStreamSynchronize(s->stream);
    if (s->lt) (void)cublasLtDestroy(s->lt);
    void *bufs[] = {s->workspace, s->scale_a, s->scale_b, s->amax_work, s->scale_tmp, s->amax_tmp};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) (void)cudaFree(bufs[i]);
    if (s->async_host) (void)cudaFreeHost(s->async_host);
    /* Memory still allocated from the pool (a caller's leak) is released with its last block. */
    if (s->pool) (void)cudaMemPoolDestroy(s->pool);
    if (s->own_stream) (void)cudaStreamDestroy(s->own_stream); /* a borrowed stream stays */
    free(s);
    ctx->backend_state = NULL;
}

/* The context's pool: device memory in stream order, with no release threshold, so that freed
 * blocks stay in the pool for the next call instead of going back to the driver at every
 * synchronization (the default pool's behaviour). */
static gln_status_t pool_create(int device, cudaMemPool_t *pool, const char *fn) {
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    GLN_TRY(gln_cuda_check(cudaMemPoolCreate(pool, &props), fn, "cudaMemPoolCreate"));
    uint64_t keep = UINT64_MAX;
    return gln_cuda_check(cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrReleaseThreshold, &keep), fn,
                          "cudaMemPoolSetAttribute(release threshold)");
}

static gln_status_t cuda_init(gln_context_t *ctx) {
    static const char *fn = "gln_context_create (cuda)";
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: no CUDA device", fn);
    }
    if (ctx->device < 0 || ctx->device >= count)
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: options->device %d must be in [0, %d)", fn,
                        ctx->device, count);
    gln_status_t st = GLN_STATUS_SUCCESS;
    gln_cuda_state_t *s = calloc(1, sizeof *s);
    if (!s) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", fn);
    ctx->backend_state = s;
    GLN_CHECK(st, fail, gln_cuda_check(cudaSetDevice(ctx->device), fn, "cudaSetDevice"));
    if (ctx->stream) {
        s->stream = (cudaStream_t)ctx->stream;
    } else {
        GLN_CHECK(st, fail, gln_cuda_check(cudaStreamCreateWithFlags(&s->own_stream, cudaStreamNonBlocking), fn,
                                           "cudaStreamCreateWithFlags"));
        s->stream = s->own_stream;
    }
    GLN_CHECK(st, fail, gln_cuda_check(cudaHostAlloc((void **)&s->async_host, sizeof *s->async_host, cudaHostAllocMapped),
                                       fn, "cudaHostAlloc(async error word)"));
    memset(s->async_host, 0, sizeof *s->async_host);
    GLN_CHECK(st, fail, gln_cuda_check(cudaHostGetDevicePointer((void **)&s->async_dev, s->async_host, 0), fn,
                                       "cudaHostGetDevicePointer(async error word)"));
    GLN_CHECK(st, fail, pool_create(ctx->device, &s->pool, fn));
    GLN_CHECK(st, fail, gln_cublas_check(cublasLtCreate(&s->lt), fn, "cublasLtCreate"));
    GLN_CHECK(st, fail, gln_cuda_check(cudaMalloc(&s->workspace, GLN_CUDA_WORKSPACE_BYTES), fn, "cudaMalloc(workspace)"));
    /* 256 bytes each: separate, maximally aligned allocations (see scale_a in the header). */
    GLN_CHECK(st, fail, gln_cuda_check(cudaMalloc((void **)&s->scale_a, 256), fn, "cudaMalloc(scale_a)"));
    GLN_CHECK(st, fail, gln_cuda_check(cudaMalloc((void **)&s->scale_b, 256), fn, "cudaMalloc(scale_b)"));
    GLN_CHECK(st, fail, gln_cuda_check(cudaMalloc((void **)&s->amax_work, 256), fn, "cudaMalloc(amax_work)"));
    GLN_CHECK(st, fail, gln_cuda_check(cudaMalloc((void **)&s->scale_tmp, 256), fn, "cudaMalloc(scale_tmp)"));
    GLN_CHECK(st, fail, gln_cuda_check(cudaMalloc((void **)&s->amax_tmp, 256), fn, "cudaMalloc(amax_tmp)"));
    return GLN_STATUS_SUCCESS;
fail:
    cuda_fini(ctx);
    return st;
}

/* ---- memory ------------------------------------------------------------------------------- */

/* The device is made current before each allocation: a process may hold contexts on several
 * devices, and cudaMalloc allocates on the current one. */
static gln_status_t cuda_malloc(gln_context_t *ctx, size_t bytes, void **ptr) {
    static const char *fn = "gln_malloc (cuda)";
    *ptr = NULL;
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    GLN_TRY(gln_cuda_check(cudaSetDevice(ctx->device), fn, "cudaSetDevice"));
    cudaError_t err = cudaMalloc(ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *ptr = NULL;
        return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of device memory", fn, bytes);
    }
    return gln_cuda_check(err, fn, "cudaMalloc");
}

static gln_status_t cuda_scratch_alloc(gln_context_t *ctx, size_t bytes, void **ptr) {
    return gln_cuda_scratch_alloc(ctx, bytes, ptr, "grouplin (cuda): device buffer");
}

static void cuda_free(gln_context_t *ctx, void *ptr) {
    if (!ptr) return;
    /* Work still queued on the stream may use ptr: cudaFree waits for the device. */
    (void)cudaSetDevice(ctx->device);
    (void)cudaFree(ptr);
}

/* Copies that involve host memory return once the host side may be reused / read (the stream is
 * synchronized); backend-to-backend copies stay asynchronous on the stream. */
static gln_status_t cuda_memcpy(gln_context_t *ctx, void *dst, const void *src, size_t bytes,
                                gln_copy_kind_t kind) {
    static const char *fn = "gln_memcpy (cuda)";
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    cudaStream_t s = gln_cuda_state(ctx)->stream;
    enum cudaMemcpyKind k = kind == GLN_COPY_HOST_TO_BACKEND   ? cudaMemcpyHostToDevice
                            : kind == GLN_COPY_BACKEND_TO_HOST ? cudaMemcpyDeviceToHost
                                                               : cudaMemcpyDeviceToDevice;
    GLN_TRY(gln_cuda_check(cudaMemcpyAsync(dst, src, bytes, k, s), fn, "cudaMemcpyAsync"));
    if (kind != GLN_COPY_BACKEND_TO_BACKEND)
        GLN_TRY(gln_cuda_check(cudaStreamSynchronize(s), fn, "cudaStreamSynchronize"));
    return GLN_STATUS_SUCCESS;
}

static gln_status_t cuda_memset(gln_context_t *ctx, void *dst, int value, size_t bytes) {
    if (bytes == 0) return GLN_STATUS_SUCCESS;
    return gln_cuda_check(cudaMemsetAsync(dst, value, bytes, gln_cuda_state(ctx)->stream), "gln memset (cuda)",
                          "cudaMemsetAsync");
}

static gln_status_t cuda_synchronize(gln_context_t *ctx) {
    return gln_cuda_check(cudaStreamSynchronize(gln_cuda_state(ctx)->stream), "gln_synchronize (cuda)",
                          "cudaStreamSynchronize");
}

/* ---- streams and device-side errors ------------------------------------------------------ */

/* Later work on `to` waits for everything enqueued on `from` so far (no host wait). */
static gln_status_t stream_follow(cudaStream_t to, cudaStream_t from, const char *fn) {
    cudaEvent_t ev;
    GLN_TRY(gln_cuda_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), fn, "cudaEventCreate"));
    gln_status_t st = gln_cuda_check(cudaEventRecord(ev, from), fn, "cudaEventRecord");
    if (st == GLN_STATUS_SUCCESS) st = gln_cuda_check(cudaStreamWaitEvent(to, ev, 0), fn, "cudaStreamWaitEvent");
    (void)cudaEventDestroy(ev); /* released once the wait has been satisfied */
    return st;
}

static gln_status_t cuda_set_stream(gln_context_t *ctx, void *stream) {
    static const char *fn = "gln_context_set_stream (cuda)";
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    cudaStream_t next = (cudaStream_t)stream;
    if (!next) {
        if (!s->own_stream)
            GLN_TRY(gln_cuda_check(cudaStreamCreateWithFlags(&s->own_stream, cudaStreamNonBlocking), fn,
                                   "cudaStreamCreateWithFlags"));
        next = s->own_stream;
    }
    if (next == s->stream) return GLN_STATUS_SUCCESS;
    GLN_TRY(stream_follow(next, s->stream, fn));
    s->stream = next;
    ctx->stream = stream;
    return GLN_STATUS_SUCCESS;
}

static void *cuda_get_stream(const gln_context_t *ctx) {
    return (void *)((const gln_cuda_state_t *)ctx->backend_state)->stream;
}

static gln_status_t cuda_async_error(gln_context_t *ctx) {
    static const char *fn = "gln_context_async_error";
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    GLN_TRY(gln_cuda_check(cudaStreamSynchronize(s->stream), fn, "cudaStreamSynchronize"));
    const gln_cuda_async_error_t e = *(volatile gln_cuda_async_error_t *)s->async_host;
    if (e.kind == GLN_CUDA_ASYNC_NONE) return GLN_STATUS_SUCCESS;
    memset(s->async_host, 0, sizeof *s->async_host);
    if (e.kind == GLN_CUDA_ASYNC_NEGATIVE_SPLIT)
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT,
                        "%s: a device-resident split was negative (member %d: %lld; must be >= 0); the "
                        "kernels treated it as 0",
                        fn, e.member, e.value);
    if (e.kind == GLN_CUDA_ASYNC_MOE_INDEX)
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT,
                        "%s: a device-resident MoE index was out of range (experts or row_of entry %d = %lld); "
                        "the kernels clamped the read or skipped the row",
                        fn, e.member, e.value);
    if (e.kind == GLN_CUDA_ASYNC_SPLITS_MISMATCH)
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT,
                        "%s: gln_grouped_quantize: device-resident out->splits differ from in->splits (first "
                        "at member %d: out->splits[%d] = %lld); the kernels followed in->splits",
                        fn, e.member, e.member, e.value);
    return gln_fail(GLN_STATUS_INVALID_ARGUMENT,
                    "%s: device-resident splits summed past the packed rows (at member %d: %lld); the "
                    "kernels clamped them to the rows",
                    fn, e.member, e.value);
}

static const gln_backend_ops_t cuda_ops = {
    .name = "cuda",
    .init = cuda_init,
    .fini = cuda_fini,
    .malloc = cuda_malloc,
    .free = cuda_free,
    .scratch_alloc = cuda_scratch_alloc,
    .scratch_free = gln_cuda_scratch_free,
    .memcpy = cuda_memcpy,
    .memset = cuda_memset,
    .synchronize = cuda_synchronize,
    .set_stream = cuda_set_stream,
    .get_stream = cuda_get_stream,
    .async_error = cuda_async_error,
    .host_alloc = gln_cuda_host_alloc,
    .host_free = gln_cuda_host_free,
    .stream_capturing = gln_cuda_stream_capturing,
    .quantize = gln_cuda_quantize,
    .dequantize = gln_cuda_dequantize,
    .grouped_quantize = gln_cuda_grouped_quantize,
    .mxfp8_swizzle = gln_cuda_mxfp8_swizzle,
    .fp8_state_gather = gln_cuda_fp8_state_gather,
    .fp8_state_record = gln_cuda_fp8_state_record,
    .fp8_state_update = gln_cuda_fp8_state_update,
    .gemm = gln_cuda_gemm,
    .grouped_gemm = gln_cuda_grouped_gemm,
    .grouped_dbias = gln_cuda_grouped_dbias,
    .grouped_quantize_dbias = gln_cuda_grouped_quantize_dbias,
    .grouped_quantize_record = gln_cuda_grouped_quantize_record,
    .amax = gln_cuda_amax,
    .grouped_amax = gln_cuda_grouped_amax,
    .cast = gln_cuda_cast,
    .add_f32 = gln_cuda_add_f32,
    .scales_from_amax = gln_cuda_scales_from_amax,
    .transpose_batched = gln_cuda_transpose_batched,
    .optimizer_step = gln_cuda_optimizer_step,
    .moe_router_forward = gln_cuda_moe_router_forward,
    .moe_router_backward = gln_cuda_moe_router_backward,
    .moe_permute_plan = gln_cuda_moe_permute_plan,
    .moe_permute = gln_cuda_moe_permute,
    .moe_permute_backward = gln_cuda_moe_permute_backward,
    .moe_unpermute = gln_cuda_moe_unpermute,
    .moe_unpermute_backward = gln_cuda_moe_unpermute_backward,
    .activation_forward = gln_cuda_activation_forward,
    .activation_backward = gln_cuda_activation_backward,
    .activation_forward_quantize = gln_cuda_activation_forward_quantize,
    .supports = gln_cuda_supports,
};

/* The table is returned even without a device: gln_context_create then fails in init with
 * NOT_SUPPORTED "no CUDA device", and gln_cuda_device_present() answers availability. */
const gln_backend_ops_t *gln_backend_cuda_ops(void) { return &cuda_ops; }

/* Context options of the GPU execution model: versioned options, the caller's stream, moving a
 * context to another stream, a caller-supplied scratch allocator, and the async error word.
 *
 * The CPU cases run everywhere.  The CUDA cases need a device (else they are skipped): they
 * check that work of a context created on (or moved to) a caller's stream is enqueued on that
 * stream — by capturing a quantize + amax sequence into a CUDA graph on it, which fails if the
 * library synchronizes or uses another stream — and that the graph's replay reproduces the eager
 * result bit for bit. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#if defined(GLN_TEST_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

static void free_stub(void *ptr, void *stream, void *user) {
    (void)ptr, (void)stream, (void)user;
}

static void test_options_versions(void) {
    gln_context_t *c = NULL;
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.size = offsetof(gln_context_options_t, stream); /* the first version */
    CHECK_OK(gln_context_create(&o, &c));
    CHECK(gln_context_stream(c) == NULL);
    gln_context_destroy(c);
    o.size = offsetof(gln_context_options_t, stream) + 3; /* ends inside a field */
    CHECK_STATUS(gln_context_create(&o, &c), GLN_STATUS_INVALID_ARGUMENT, "not a known version");
    CHECK(c == NULL);
    o = (gln_context_options_t)GLN_CONTEXT_OPTIONS_INIT;
    o.stream = &o; /* any non-NULL stream on the CPU */
    CHECK_STATUS(gln_context_create(&o, &c), GLN_STATUS_INVALID_ARGUMENT, "options->stream");
    o.stream = NULL;
    o.alloc = (gln_alloc_fn)NULL;
    o.free = free_stub;
    CHECK_STATUS(gln_context_create(&o, &c), GLN_STATUS_INVALID_ARGUMENT, "options->alloc");
}

static void test_cpu_stream_calls(void) {
    gln_context_t *c = NULL;
    CHECK_OK(gln_context_create(NULL, &c));
    CHECK_OK(gln_context_set_stream(c, NULL));
    int dummy = 0;
    CHECK_STATUS(gln_context_set_stream(c, &dummy), GLN_STATUS_INVALID_ARGUMENT, "stream");
    CHECK_OK(gln_context_async_error(c));
    CHECK_STATUS(gln_context_set_stream(NULL, NULL), GLN_STATUS_INVALID_ARGUMENT, "ctx");
    CHECK_STATUS(gln_context_async_error(NULL), GLN_STATUS_INVALID_ARGUMENT, "ctx");
    gln_context_destroy(c);
}

#if defined(GLN_TEST_HAVE_CUDA)
enum { ROWS = 256, COLS = 384 };

typedef struct alloc_count {
    int allocs, frees;
} alloc_count_t;

static void *count_alloc(size_t bytes, void *stream, void *user) {
    void *p = NULL;
    ((alloc_count_t *)user)->allocs++;
    return cudaMallocAsync(&p, bytes, (cudaStream_t)stream) == cudaSuccess ? p : NULL;
}
static void count_free(void *ptr, void *stream, void *user) {
    ((alloc_count_t *)user)->frees++;
    (void)cudaFreeAsync(ptr, (cudaStream_t)stream);
}

/* Device buffers of one per-tensor current-scaling quantize of x (bf16 [ROWS, COLS]). */
typedef struct qbufs {
    void *x, *q, *qt, *scale_inv, *colsi, *amax, *scale;
} qbufs_t;

static void qbufs_new(gln_context_t *cu, qbufs_t *b, uint64_t seed) {
    const size_t n = (size_t)ROWS * COLS;
    uint16_t *h = malloc(n * 2);
    gln_rng_t r = gln_rng_seed(seed);
    for (size_t i = 0; i < n; i++) h[i] = gln_fp32_to_bf16((float)gln_rng_uniform(&r, -3.0, 3.0));
    void **bufs[] = {&b->x, &b->q, &b->qt, &b->scale_inv, &b->colsi, &b->amax, &b->scale};
    const size_t bytes[] = {n * 2, n, n, 4, 4, 4, 4};
    for (int i = 0; i < 7; i++) CHECK_OK(gln_malloc(cu, bytes[i], bufs[i]));
    CHECK_OK(gln_memcpy(cu, b->x, h, n * 2, GLN_COPY_HOST_TO_BACKEND));
    free(h);
}

static void qbufs_free(gln_context_t *cu, qbufs_t *b) {
    void *bufs[] = {b->x, b->q, b->qt, b->scale_inv, b->colsi, b->amax, b->scale};
    for (int i = 0; i < 7; i++) CHECK_OK(gln_free(cu, bufs[i]));
}

static gln_status_t quantize(gln_context_t *cu, const qbufs_t *b) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.mode = GLN_SCALING_TENSOR;
    cfg.rowwise = cfg.columnwise = 1;
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, ROWS, COLS, b->x);
    gln_tensor_t out = {GLN_DTYPE_FP8_E4M3, ROWS, COLS, b->q, GLN_SCALING_TENSOR, b->scale_inv,
                        b->qt, b->colsi, b->amax, b->scale};
    return gln_quantize(cu, &cfg, &in, &out);
}

/* Bytes of q, qt and the scales, copied to the host. */
static void qbufs_read(gln_context_t *cu, const qbufs_t *b, uint8_t *dst) {
    const size_t n = (size_t)ROWS * COLS;
    CHECK_OK(gln_memcpy(cu, dst, b->q, n, GLN_COPY_BACKEND_TO_HOST));
    CHECK_OK(gln_memcpy(cu, dst + n, b->qt, n, GLN_COPY_BACKEND_TO_HOST));
    CHECK_OK(gln_memcpy(cu, dst + 2 * n, b->scale_inv, 4, GLN_COPY_BACKEND_TO_HOST));
    CHECK_OK(gln_memcpy(cu, dst + 2 * n + 4, b->amax, 4, GLN_COPY_BACKEND_TO_HOST));
}

/* The eager result into `ref`, then q overwritten so that a later run must rewrite it. */
static void quantize_reference_then_clobber(gln_context_t *cu, const qbufs_t *b, uint8_t *ref) {
    CHECK_OK(quantize(cu, b));
    qbufs_read(cu, b, ref);
    CHECK_OK(gln_memcpy(cu, b->q, b->x, (size_t)ROWS * COLS / 2, GLN_COPY_BACKEND_TO_BACKEND));
}

/* A context on the caller's stream: capture one quantize into a graph, replay it, compare. */
static void test_cuda_caller_stream_capture(void) {
    if (!gln_backend_available(GLN_BACKEND_CUDA)) return;
    cudaStream_t user;
    CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    alloc_count_t count = {0, 0};
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CUDA;
    o.stream = user;
    o.alloc = count_alloc;
    o.free = count_free;
    o.alloc_user = &count;
    gln_context_t *cu = NULL;
    CHECK_OK(gln_context_create(&o, &cu));
    if (!cu) return;
    CHECK(gln_context_stream(cu) == (void *)user);
    qbufs_t b;
    qbufs_new(cu, &b, 11);
    const size_t bytes = 2 * (size_t)ROWS * COLS + 8;
    uint8_t *eager = malloc(bytes), *replay = malloc(bytes);
    quantize_reference_then_clobber(cu, &b, eager);

    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(user, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    gln_status_t st = quantize(cu, &b);
    CHECK(cudaStreamEndCapture(user, &graph) == cudaSuccess);
    CHECK_MSG(st == GLN_STATUS_SUCCESS, "quantize under capture: %s", gln_last_error());
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int rep = 0; rep < 2 && exec; rep++) {
        CHECK(cudaGraphLaunch(exec, user) == cudaSuccess);
        qbufs_read(cu, &b, replay);
        CHECK_MSG(memcmp(eager, replay, bytes) == 0, "graph replay %d differs from the eager quantize", rep);
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CHECK_OK(gln_context_async_error(cu));
    qbufs_free(cu, &b);
    CHECK_OK(gln_context_destroy(cu));
    CHECK_MSG(count.allocs == count.frees, "allocator: %d allocations, %d frees", count.allocs, count.frees);
    CHECK(cudaStreamDestroy(user) == cudaSuccess);
    free(eager), free(replay);
}

/* Moving a context between streams keeps its work ordered: results equal the single-stream ones. */
static void test_cuda_set_stream(void) {
    if (!gln_backend_available(GLN_BACKEND_CUDA)) return;
    gln_context_t *cu = gln_test_cuda_context(NULL);
    if (!cu) return;
    void *own = gln_context_stream(cu);
    CHECK(own != NULL);
    cudaStream_t other;
    CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) == cudaSuccess);
    qbufs_t b;
    qbufs_new(cu, &b, 12);
    const size_t bytes = 2 * (size_t)ROWS * COLS + 8;
    uint8_t *ref = malloc(bytes), *got = malloc(bytes);
    quantize_reference_then_clobber(cu, &b, ref);
    CHECK_OK(gln_context_set_stream(cu, other)); /* the clobber above is ordered before this */
    CHECK(gln_context_stream(cu) == (void *)other);
    CHECK_OK(quantize(cu, &b));
    qbufs_read(cu, &b, got);
    CHECK_MSG(memcmp(ref, got, bytes) == 0, "quantize after gln_context_set_stream differs");
    CHECK_OK(gln_context_set_stream(cu, NULL));
    CHECK(gln_context_stream(cu) == own);
    qbufs_free(cu, &b);
    CHECK_OK(gln_context_destroy(cu));
    CHECK(cudaStreamDestroy(other) == cudaSuccess);
    free(ref), free(got);
}
/* Grouped dbias with device splits: captured once into a graph, replayed with different splits
 * written between replays; each replay equals the CPU backend bit for bit. */
enum { DB_NUM = 5, DB_ROWS = 300, DB_COLS = 70 };

static void dbias_cpu(const uint16_t *x, const int64_t *splits, float *db) {
    gln_context_t *cpu = NULL;
    CHECK_OK(gln_context_create(NULL, &cpu));
    gln_grouped_tensor_t g = {DB_NUM, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, DB_ROWS, DB_COLS, (void *)x)};
    gln_tensor_t out[DB_NUM];
    for (int i = 0; i < DB_NUM; i++) out[i] = gln_tensor_make(GLN_DTYPE_FP32, 1, DB_COLS, db + i * DB_COLS);
    CHECK_OK(gln_grouped_dbias(cpu, &g, out, 0));
    gln_context_destroy(cpu);
}

static void test_cuda_dbias_graph_device_splits(void) {
    if (!gln_backend_available(GLN_BACKEND_CUDA)) return;
    cudaStream_t user;
    CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    gln_context_t *cu = gln_test_cuda_context(user);
    if (!cu) return;
    const size_t nx = (size_t)DB_ROWS * DB_COLS, ndb = (size_t)DB_NUM * DB_COLS;
    uint16_t *xh = malloc(nx * 2);
    float *ref = malloc(ndb * 4), *got = malloc(ndb * 4);
    gln_rng_t r = gln_rng_seed(5);
    for (size_t i = 0; i < nx; i++) xh[i] = gln_fp32_to_bf16((float)gln_rng_uniform(&r, -2.0, 2.0));
    void *xd = NULL, *dbd = NULL, *sd = NULL;
    CHECK_OK(gln_malloc(cu, nx * 2, &xd));
    CHECK_OK(gln_malloc(cu, ndb * 4, &dbd));
    CHECK_OK(gln_malloc(cu, DB_NUM * sizeof(int64_t), &sd));
    CHECK_OK(gln_memcpy(cu, xd, xh, nx * 2, GLN_COPY_HOST_TO_BACKEND));
    gln_grouped_tensor_t g = {DB_NUM, sd, 1, gln_tensor_make(GLN_DTYPE_BF16, DB_ROWS, DB_COLS, xd)};
    gln_tensor_t out[DB_NUM];
    for (int i = 0; i < DB_NUM; i++) out[i] = gln_tensor_make(GLN_DTYPE_FP32, 1, DB_COLS, (float *)dbd + i * DB_COLS);

    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(user, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    gln_status_t st = gln_grouped_dbias(cu, &g, out, 0);
    CHECK(cudaStreamEndCapture(user, &graph) == cudaSuccess);
    CHECK_MSG(st == GLN_STATUS_SUCCESS, "grouped dbias under capture: %s", gln_last_error());
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    static const int64_t cases[3][DB_NUM] = {{60, 0, 17, 129, 94}, {0, 300, 0, 0, 0}, {1, 5, 0, 33, 2}};
    for (int c = 0; c < 3 && exec; c++) {
        CHECK_OK(gln_memcpy(cu, sd, cases[c], sizeof cases[c], GLN_COPY_HOST_TO_BACKEND));
        CHECK(cudaMemsetAsync(dbd, 0xFF, ndb * 4, user) == cudaSuccess); /* NaN poison */
        CHECK(cudaGraphLaunch(exec, user) == cudaSuccess);
        CHECK_OK(gln_memcpy(cu, got, dbd, ndb * 4, GLN_COPY_BACKEND_TO_HOST));
        dbias_cpu(xh, cases[c], ref);
        CHECK_MSG(memcmp(ref, got, ndb * 4) == 0, "replay %d of the captured grouped dbias differs from the CPU", c);
        CHECK_OK(gln_context_async_error(cu));
    }
    /* Bad device splits: clamped on the device, reported by gln_context_async_error. */
    const int64_t bad[DB_NUM] = {4, -1, 500, 0, 0};
    CHECK_OK(gln_memcpy(cu, sd, bad, sizeof bad, GLN_COPY_HOST_TO_BACKEND));
    CHECK_OK(gln_grouped_dbias(cu, &g, out, 0));
    CHECK_STATUS(gln_context_async_error(cu), GLN_STATUS_INVALID_ARGUMENT, "member 1");
    CHECK_OK(gln_context_async_error(cu)); /* reading clears it */
    const int64_t past[DB_NUM] = {4, 1, 500, 0, 0};
    CHECK_OK(gln_memcpy(cu, sd, past, sizeof past, GLN_COPY_HOST_TO_BACKEND));
    CHECK_OK(gln_grouped_dbias(cu, &g, out, 0));
    CHECK_STATUS(gln_context_async_error(cu), GLN_STATUS_INVALID_ARGUMENT, "past the packed rows");
    const int64_t clamped[DB_NUM] = {4, 1, 295, 0, 0};
    CHECK_OK(gln_memcpy(cu, got, dbd, ndb * 4, GLN_COPY_BACKEND_TO_HOST));
    dbias_cpu(xh, clamped, ref);
    CHECK_MSG(memcmp(ref, got, ndb * 4) == 0, "clamped device splits: dbias differs from the clamped CPU result");
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CHECK_OK(gln_free(cu, xd));
    CHECK_OK(gln_free(cu, dbd));
    CHECK_OK(gln_free(cu, sd));
    CHECK_OK(gln_context_destroy(cu));
    CHECK(cudaStreamDestroy(user) == cudaSuccess);
    free(xh), free(ref), free(got);
}
#endif

int main(int argc, char **argv) {
    static const gln_test_case_t cases[] = {
        GLN_CASE(test_options_versions),
        GLN_CASE(test_cpu_stream_calls),
#if defined(GLN_TEST_HAVE_CUDA)
        GLN_CASE(test_cuda_caller_stream_capture),
        GLN_CASE(test_cuda_set_stream),
        GLN_CASE(test_cuda_dbias_graph_device_splits),
#endif
    };
    return gln_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}

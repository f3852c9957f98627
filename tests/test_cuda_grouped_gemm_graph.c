/* The CUDA grouped GEMM under a CUDA graph and in a chain of launches (the operands and their
 * exactness: tests/harness/grouped_operands.h; the cases without a graph:
 * test_cuda_grouped_gemm.c).
 *
 * A bf16 fprop with device splits is captured on a caller's stream and replayed after other
 * splits are written into the same device buffer, and the same on MXFP8 / power-of-two block
 * operands (which the CUDA backend dequantizes on the device inside the graph): each replay must
 * equal the CPU's result for those splits bit for bit.  A chain of fprop and accumulating wgrad
 * calls with programmatic dependent launch on must leave every dW equal to the CPU's.
 *
 * Skips (exit 77) without a CUDA device. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>
#include <string.h>

#include "device_twin.h"
#include "grouped_operands.h"
#include "harness.h"
#include "numerics/numerics.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cuda_runtime.h>
/* The CUTLASS dispatch (internal, cuda_grouped_gemm.c): did a kernel take the call? */
gln_status_t gln_cuda_grouped_gemm_cutlass(gln_context_t *ctx, const gln_grouped_gemm_args_t *args, int *handled);
#endif

static gln_context_t *g_cu, *g_cpu;

#ifdef GLN_TEST_HAVE_CUDA
/* Capture one grouped GEMM on the caller's stream `user` (no host synchronization may happen
 * inside, or the capture fails); NULL when it failed (the CHECKs say how). */
static cudaGraphExec_t capture_gemm(gln_context_t *cu, cudaStream_t user, const gln_grouped_gemm_args_t *da,
                                    cudaGraph_t *graph) {
    cudaGraphExec_t exec = NULL;
    *graph = NULL;
    CHECK_OK(gln_synchronize(cu));
    CHECK(cudaStreamBeginCapture(user, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    CHECK_OK(gln_grouped_gemm(cu, da));
    CHECK(cudaStreamEndCapture(user, graph) == cudaSuccess);
    CHECK(*graph && cudaGraphInstantiate(&exec, *graph, 0) == cudaSuccess);
    return exec;
}

/* Replay exec after writing `splits` into the device splits ds and poisoning y (NaN): y must
 * equal the CPU's da with host operands hw and hx for those splits, bit for bit. */
static void replay_expect(gln_context_t *cu, cudaStream_t user, cudaGraphExec_t exec, gln_twin_t *ds,
                          const int64_t *splits, gln_gop_operand_t *y, const gln_grouped_gemm_args_t *da,
                          const gln_tensor_t *hw, gln_tensor_t hx_packed, const char *what) {
    gln_twin_set(g_cu, ds, splits);
    gln_twin_set(g_cu, &y->d, y->h); /* NaN */
    CHECK(cudaGraphLaunch(exec, user) == cudaSuccess);
    CHECK_OK(gln_synchronize(cu));
    void *want = malloc(y->d.bytes);
    memcpy(want, y->h, y->d.bytes);
    const int32_t num = da->b->num;
    gln_grouped_tensor_t hx = {num, splits, 0, hx_packed};
    gln_grouped_tensor_t hy = {num, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, y->rows, y->cols, want)};
    gln_grouped_gemm_args_t ha = *da;
    ha.a_list = hw, ha.b = &hx, ha.d_grouped = &hy;
    CHECK_OK(gln_grouped_gemm(g_cpu, &ha));
    gln_twin_expect(g_cu, &y->d, want, what);
    free(want);
}

/* Capture a bf16 fprop with device splits on a caller's stream; replay it after writing other
 * splits into the same device buffer: each replay equals the CPU's result for those splits. */
static void test_graph_capture(void) {
    gln_rng_t rng = gln_rng_seed(1603);
    enum { E = 4 };
    const int64_t kin = 64, kout = 48, rows = 160;
    const int64_t sets[3][E] = {{5, 0, 17, 1}, {0, 0, 129, 0}, {40, 40, 40, 40}};
    cudaStream_t user = NULL;
    CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    gln_context_t *cu = gln_test_cuda_context(user);
    if (!cu) return;
    gln_context_t *saved = g_cu;
    g_cu = cu; /* dev_* helpers allocate through the captured context */
    gln_gop_operand_t x = gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_BF16, rows, kin, 1, 0);
    gln_gop_operand_t w[E];
    gln_tensor_t hw[E], cw[E];
    for (int i = 0; i < E; i++) {
        w[i] = gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_BF16, kout, kin, 1, 0);
        hw[i] = gln_gop_view(&w[i], 0, NULL, NULL);
        cw[i] = gln_gop_view(&w[i], 1, NULL, NULL);
    }
    gln_gop_operand_t y = gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_BF16, rows, kout, 0, NAN);
    gln_twin_t ds = gln_twin_upload(g_cu, sets[0], sizeof sets[0]);
    gln_grouped_tensor_t cx = {E, ds.d, 1, gln_gop_view(&x, 1, NULL, NULL)};
    gln_grouped_tensor_t cy = {E, ds.d, 1, gln_tensor_make(GLN_DTYPE_BF16, rows, kout, y.d.d)};
    gln_grouped_gemm_args_t da = GLN_GROUPED_GEMM_ARGS_INIT;
    da.layout = GLN_LAYOUT_TN, da.a_list = cw, da.b = &cx, da.d_grouped = &cy;
    cudaGraph_t graph;
    cudaGraphExec_t exec = capture_gemm(cu, user, &da, &graph);
    for (int s = 0; s < 3 && exec; s++) {
        char what[80];
        snprintf(what, sizeof what, "graph replay %d", s);
        replay_expect(cu, user, exec, &ds, sets[s], &y, &da, hw, gln_gop_view(&x, 0, NULL, NULL), what);
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CHECK_OK(gln_context_async_error(cu));
    gln_twin_free(g_cu, &ds);
    gln_gop_operand_free(g_cu, &x), gln_gop_operand_free(g_cu, &y);
    for (int i = 0; i < E; i++) gln_gop_operand_free(g_cu, &w[i]);
    g_cu = saved;
    gln_context_destroy(cu);
    cudaStreamDestroy(user);
}

/* Programmatic dependent launch across grouped GEMMs (cutlass/grouped_sm90.cuh): each setup kernel
 * and each CUTLASS kernel may be scheduled while the kernel before it still runs, and must wait
 * for its writes.  A chain enqueued with no host synchronization: per step, y = x_s · W_iᵀ (fprop
 * from one of two inputs, alternating, so a read of the previous step's y shows), then
 * dW_i += g_iᵀ · y_i (the wgrad reading y, accumulating into FP32); y starts NaN-poisoned.  After
 * the chain dW equals the CPU's bit for bit (|y| <= 256 is exact in bf16, every sum exact in
 * FP32).  Run with PDL (the default) and under GLN_CUDA_PDL=0. */
/* One GEMM of the chain: on the device through the CUTLASS dispatch (which must take it: the PDL
 * launches are the CUTLASS path's), on the CPU through the public call. */
static void chain_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *a, const char *what) {
#if defined(GLN_TEST_HAVE_CUTLASS)
    if (ctx == g_cu) {
        int handled = -1;
        CHECK_OK(gln_cuda_grouped_gemm_cutlass(ctx, a, &handled));
        CHECK_MSG(handled == 1, "PDL chain: no CUTLASS kernel took the %s", what);
        return;
    }
#else
    (void)what;
#endif
    CHECK_OK(gln_grouped_gemm(ctx, a));
}

static void pdl_chain(void) {
    gln_rng_t rng = gln_rng_seed(1607);
    enum { E = 8, STEPS = 6 };
    static const int64_t splits[E] = {300, 0, 17, 512, 129, 256, 1, 333};
    const int64_t kin = 16, kmid = 256, kg = 64;
    int64_t rows = 0;
    for (int i = 0; i < E; i++) rows += splits[i];
    gln_twin_t ds = gln_twin_upload(g_cu, splits, sizeof splits);
    gln_gop_operand_t x[2] = {gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_BF16, rows, kin, 1, 0),
                      gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_BF16, rows, kin, 1, 0)};
    gln_gop_operand_t g = gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_BF16, rows, kg, 1, 0);
    gln_gop_operand_t y = gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_BF16, rows, kmid, 0, NAN);
    gln_gop_operand_t w[E], dw[E];
    gln_tensor_t hw[E], cw[E], hdw[E], cdw[E];
    for (int i = 0; i < E; i++) {
        w[i] = gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_BF16, kmid, kin, 1, 0);
        dw[i] = gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_FP32, kg, kmid, 1, 0);
        hw[i] = gln_gop_view(&w[i], 0, NULL, NULL), cw[i] = gln_gop_view(&w[i], 1, NULL, NULL);
        hdw[i] = gln_gop_view(&dw[i], 0, NULL, NULL), cdw[i] = gln_gop_view(&dw[i], 1, NULL, NULL);
    }
    void *hy = malloc(y.d.bytes);
    memcpy(hy, y.h, y.d.bytes);
    for (int on_device = 0; on_device < 2; on_device++) {
        gln_context_t *ctx = on_device ? g_cu : g_cpu;
        const int64_t *sp = on_device ? (const int64_t *)ds.d : splits;
        gln_grouped_tensor_t gy = {E, sp, on_device, gln_tensor_make(GLN_DTYPE_BF16, rows, kmid, on_device ? y.d.d : hy)};
        gln_grouped_tensor_t gg = {E, sp, on_device, gln_gop_view(&g, on_device, NULL, NULL)};
        for (int s = 0; s < STEPS; s++) {
            gln_grouped_tensor_t gx = {E, sp, on_device, gln_gop_view(&x[s % 2], on_device, NULL, NULL)};
            gln_grouped_gemm_args_t f = GLN_GROUPED_GEMM_ARGS_INIT, wg = GLN_GROUPED_GEMM_ARGS_INIT;
            f.layout = GLN_LAYOUT_TN, f.a_list = on_device ? cw : hw, f.b = &gx, f.d_grouped = &gy;
            wg.layout = GLN_LAYOUT_NT, wg.a_grouped = &gy, wg.b = &gg, wg.d_list = on_device ? cdw : hdw;
            wg.accumulate = 1;
            chain_gemm(ctx, &f, "fprop");
            chain_gemm(ctx, &wg, "wgrad");
        }
    }
    CHECK_OK(gln_synchronize(g_cu));
    for (int i = 0; i < E; i++) {
        char what[80];
        snprintf(what, sizeof what, "PDL chain dW[%d] (GLN_CUDA_PDL=%s)", i,
                 getenv("GLN_CUDA_PDL") ? getenv("GLN_CUDA_PDL") : "unset");
        gln_twin_expect(g_cu, &dw[i].d, dw[i].h, what);
    }
    CHECK_OK(gln_context_async_error(g_cu));
    free(hy);
    gln_twin_free(g_cu, &ds);
    gln_gop_operand_free(g_cu, &x[0]), gln_gop_operand_free(g_cu, &x[1]);
    gln_gop_operand_free(g_cu, &g), gln_gop_operand_free(g_cu, &y);
    for (int i = 0; i < E; i++) gln_gop_operand_free(g_cu, &w[i]), gln_gop_operand_free(g_cu, &dw[i]);
}

static void test_pdl_chain(void) {
    pdl_chain();
    CHECK(setenv("GLN_CUDA_PDL", "0", 1) == 0);
    pdl_chain();
    CHECK(unsetenv("GLN_CUDA_PDL") == 0);
}

/* Zeroed device buffers of a grouped quantized tensor large enough for any splits
 * (gln_grouped_scale_bound), and their view. */
static gln_tensor_t device_bound_new(gln_scaling_mode_t mode, int num, int64_t rows, int64_t cols, gln_twin_t d[4]) {
    int64_t se_r, se_c;
    CHECK_OK(gln_grouped_scale_bound(mode, num, rows, cols, &se_r, &se_c));
    const size_t es = mode == GLN_SCALING_MXFP8_1D ? 1 : 4, n = (size_t)(rows * cols);
    const size_t bytes[4] = {n, n, (size_t)se_r * es, (size_t)se_c * es};
    void *zero = calloc(n + (size_t)(se_r + se_c) * es + 1, 1);
    for (int k = 0; k < 4; k++) d[k] = gln_twin_upload(g_cu, zero, bytes[k]);
    free(zero);
    gln_tensor_t t = gln_tensor_make(GLN_DTYPE_FP8_E4M3, rows, cols, d[0].d);
    t.scaling = mode, t.col_data = d[1].d, t.scale_inv = d[2].d, t.col_scale_inv = d[3].d;
    return t;
}

/* The emulated path captures too: an MXFP8 or power-of-two block fprop with device splits
 * (the plan, the grouped and the weights' dequantization and the bf16 kernel all in the graph),
 * replayed after writing other splits and the activations quantized for them into the same
 * device buffers (sized by gln_grouped_scale_bound). */
static void capture_quant(gln_gop_kind_t kind) {
    gln_rng_t rng = gln_rng_seed(1604 + (uint64_t)kind);
    enum { E = 4 };
    const int64_t kin = 64, kout = 48, rows = 160;
    const int64_t sets[3][E] = {{5, 0, 17, 1}, {0, 0, 129, 0}, {40, 40, 40, 40}};
    const gln_scaling_mode_t act = kind == GLN_GOP_KIND_MXFP8 ? GLN_SCALING_MXFP8_1D : GLN_SCALING_BLOCK_1D;
    const gln_scaling_mode_t wmode = kind == GLN_GOP_KIND_MXFP8 ? GLN_SCALING_MXFP8_1D : GLN_SCALING_BLOCK_2D;
    cudaStream_t user = NULL;
    CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    gln_context_t *cu = gln_test_cuda_context(user);
    if (!cu) return;
    gln_context_t *saved = g_cu;
    g_cu = cu;
    gln_gop_qoperand_t w[E];
    gln_tensor_t hw[E], cw[E];
    for (int i = 0; i < E; i++) {
        w[i] = gln_gop_qtensor_new(g_cpu, g_cu, &rng, wmode, kout, kin);
        hw[i] = w[i].h, cw[i] = w[i].d;
    }
    gln_twin_t xd[4];
    const gln_tensor_t xt = device_bound_new(act, E, rows, kin, xd);
    gln_gop_operand_t y = gln_gop_operand_new(g_cu, &rng, GLN_DTYPE_BF16, rows, kout, 0, NAN);
    gln_twin_t ds = gln_twin_upload(g_cu, sets[0], sizeof sets[0]);
    gln_grouped_tensor_t cx = {E, ds.d, 1, xt};
    gln_grouped_tensor_t cy = {E, ds.d, 1, gln_tensor_make(GLN_DTYPE_BF16, rows, kout, y.d.d)};
    gln_grouped_gemm_args_t da = GLN_GROUPED_GEMM_ARGS_INIT;
    da.layout = GLN_LAYOUT_TN, da.a_list = cw, da.b = &cx, da.d_grouped = &cy, da.block_scales_pow2 = 1;
    cudaGraph_t graph;
    cudaGraphExec_t exec = capture_gemm(cu, user, &da, &graph);
    for (int s = 0; s < 3 && exec; s++) {
        gln_gop_qoperand_t x = gln_gop_qgrouped_new(g_cpu, g_cu, &rng, act, E, sets[s], rows, kin);
        for (int k = 0; k < 4; k++)
            if (x.db[k].bytes) CHECK_OK(gln_memcpy(cu, xd[k].d, x.hb[k], x.db[k].bytes, GLN_COPY_HOST_TO_BACKEND));
        char what[80];
        snprintf(what, sizeof what, "%s graph replay %d", gln_gop_kind_name(kind), s);
        replay_expect(cu, user, exec, &ds, sets[s], &y, &da, hw, x.h, what);
        gln_gop_qoperand_free(g_cu, &x);
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CHECK_OK(gln_context_async_error(cu));
    gln_twin_free(g_cu, &ds);
    for (int k = 0; k < 4; k++) gln_twin_free(g_cu, &xd[k]);
    gln_gop_operand_free(g_cu, &y);
    for (int i = 0; i < E; i++) gln_gop_qoperand_free(g_cu, &w[i]);
    g_cu = saved;
    gln_context_destroy(cu);
    cudaStreamDestroy(user);
}

static void test_graph_capture_emulated(void) {
    capture_quant(GLN_GOP_KIND_MXFP8);
    capture_quant(GLN_GOP_KIND_BLOCK);
}
#endif

static const gln_test_case_t k_cases[] = {
#ifdef GLN_TEST_HAVE_CUDA
    GLN_CASE(test_graph_capture),
    GLN_CASE(test_graph_capture_emulated),
    GLN_CASE(test_pdl_chain),
#endif
};

int main(int argc, char **argv) {
    /* The block-scaled cases here check the dequantize emulation and the loop bit for bit; the
     * block-scaled CUTLASS kernels that take them by default (FP8 tensor-core accumulation, not
     * bitwise) have their own test, test_cuda_grouped_blockwise.c.  The backend reads the switch
     * at every call, so setting it before the contexts exist changes nothing else. */
    setenv("GLN_CUDA_BLOCKWISE", "0", 1);
    return gln_test_cuda_main(argc, argv, &g_cpu, &g_cu, k_cases, sizeof k_cases / sizeof k_cases[0]);
}

/* Distributed weights on one GPU: the sharded group on device memory over NCCL (world size 1,
 * when built with GLN_NCCL) and over the self communicator bound to the CUDA context.
 * Skips (exit 77) without a CUDA device.
 *
 *   dist kernels   add_f32 and scales_from_amax on the device equal their CPU twins bit for bit
 *                  (NaN payloads, Inf, zero, epsilon, power-of-two scales).
 *   comm device    every collective and the asynchronous start / wait on device buffers give
 *                  the single rank's data back; a host-memory communicator cannot serve a
 *                  group on a CUDA context.
 *   layer          a sharded layer equals a plain layer holding the same weights on the same
 *                  GPU: y and dx bitwise, main_grad after an overwrite and an accumulating step
 *                  bitwise (exact data: small integers, power-of-two scales), for bf16, FP8
 *                  current scaling, MXFP8 and FP8 block with the FP8 all-gather, with prefetch
 *                  and asynchronous finalize; no gathered weights alive after a step, a peak of
 *                  one gathered group.
 *   capture        a whole step of a sharded layer (prefetches, forward, backward, the stream-
 *                  ordered wait of the asynchronous finalize) captured in a CUDA graph, the
 *                  collectives included; every replay equals an eager twin bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#if defined(GLN_TEST_HAVE_CUDA)
#include <cuda_runtime.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_dist.h"
#include "comm/comm.h"
#include "backend/context.h"

enum { NE = 4, KIN = 128, KOUT = 48, ROWS = 100 }; /* K_in % 128 == 0: the MXFP8 all-gather */
#define TOTAL ((int64_t)NE * KIN * KOUT)
static const int64_t k_splits[NE] = {0, 37, 40, 23};

typedef enum comm_kind { COMM_SELF = 0, COMM_NCCL = 1 } comm_kind_t;
static const char *const kind_names[2] = {"self", "nccl"};

static void *dev_upload(gln_context_t *cu, const void *h, size_t bytes) {
    void *d = NULL;
    CHECK_OK(gln_malloc(cu, bytes, &d));
    CHECK_OK(gln_memcpy(cu, d, h, bytes, GLN_COPY_HOST_TO_BACKEND));
    return d;
}

static void *dev_download(gln_context_t *cu, const void *d, size_t bytes) {
    void *h = malloc(bytes);
    CHECK_OK(gln_memcpy(cu, h, d, bytes, GLN_COPY_BACKEND_TO_HOST));
    return h;
}

static gln_context_t *cuda_ctx(void *stream) {
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CUDA;
    o.stream = stream;
    gln_context_t *cu = NULL;
    CHECK_OK(gln_context_create(&o, &cu));
    return cu;
}

static gln_comm_t *comm_new(gln_context_t *cu, comm_kind_t kind) {
    gln_comm_t *c = NULL;
    if (kind == COMM_SELF) {
        CHECK_OK(gln_comm_create_self(cu, &c));
        return c;
    }
    gln_nccl_id_t id;
    CHECK_OK(gln_nccl_id_create(&id));
    CHECK_OK(gln_comm_create_nccl(cu, &id, 0, 1, &c));
    return c;
}

static int num_kinds(void) { return gln_nccl_available() ? 2 : 1; }

static void fill_ints(void *h, gln_dtype_t dt, size_t n, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (size_t i = 0; i < n; i++) gln_store(h, dt, i, (double)gln_rng_int(&r, -3, 3));
}

/* ---- the backend slots of the group ----------------------------------------------------------- */

static void test_dist_kernels(void) {
    gln_context_t *cu = cuda_ctx(NULL);
    if (!cu) return;
    enum { N = 5000 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    gln_rng_t r = gln_rng_seed(3);
    for (int i = 0; i < N; i++) {
        x[i] = (float)gln_rng_normal(&r);
        y[i] = (float)(gln_rng_normal(&r) * 1e3);
    }
    /* inf + -inf (element 6) makes a new NaN whose bits are the hardware's own (x86: 0xFFC00000,
     * the GPU: 0x7FFFFFFF): it is checked to be a NaN, and both sides are set equal before the
     * bitwise comparison; NaNs that come in keep their bits on both. */
    x[1] = NAN, y[2] = -NAN, x[3] = INFINITY, y[3] = INFINITY, x[4] = -0.0f, y[4] = 0.0f;
    x[6] = INFINITY, y[6] = -INFINITY;
    memcpy(&x[5], &(uint32_t){0x7FA12345u}, 4); /* a NaN with a payload */
    float *xd = dev_upload(cu, x, N * sizeof(float)), *yd = dev_upload(cu, y, N * sizeof(float));
    CHECK_OK(cu->ops->add_f32(cu, yd, xd, N));
    CHECK_OK(gln_cpu_add_f32(NULL, y, x, N));
    float *got = dev_download(cu, yd, N * sizeof(float));
    CHECK_MSG(isnan(got[6]) && isnan(y[6]), "add_f32: inf + -inf must be a NaN (device %g, CPU %g)", got[6], y[6]);
    got[6] = y[6];
    gln_check_bitwise("add_f32 device vs CPU twin", got, y, N * sizeof(float));
    free(got);

    float amax[12] = {0.0f, 1e-30f, 1.0f, 448.0f, 3.5f, NAN, INFINITY, 3e38f, 1e-40f, 0.3f, 57344.0f, 2.5e-3f};
    float *ad = dev_upload(cu, amax, sizeof amax);
    float *sd = NULL, *sid = NULL;
    CHECK_OK(gln_malloc(cu, sizeof amax, (void **)&sd));
    CHECK_OK(gln_malloc(cu, sizeof amax, (void **)&sid));
    for (int pow2 = 0; pow2 <= 1; pow2++)
        for (int e = 0; e <= 1; e++) {
            float eps = e ? 1e-3f : 0.0f, s[12], si[12];
            CHECK_OK(cu->ops->scales_from_amax(cu, ad, 12, 448.0f, pow2, eps, sd, sid));
            CHECK_OK(gln_cpu_scales_from_amax(NULL, amax, 12, 448.0f, pow2, eps, s, si));
            float *gs = dev_download(cu, sd, sizeof amax), *gsi = dev_download(cu, sid, sizeof amax);
            char what[80];
            snprintf(what, sizeof what, "scales_from_amax pow2 %d eps %g: scale", pow2, eps);
            gln_check_bitwise(what, gs, s, sizeof s);
            snprintf(what, sizeof what, "scales_from_amax pow2 %d eps %g: scale_inv", pow2, eps);
            gln_check_bitwise(what, gsi, si, sizeof si);
            free(gs), free(gsi);
        }
    CHECK_OK(gln_free(cu, xd));
    CHECK_OK(gln_free(cu, yd));
    CHECK_OK(gln_free(cu, ad));
    CHECK_OK(gln_free(cu, sd));
    CHECK_OK(gln_free(cu, sid));
    free(x), free(y);
    CHECK_OK(gln_context_destroy(cu));
}

/* ---- collectives on device memory ----------------------------------------------------------- */

static void comm_device(comm_kind_t kind) {
    gln_context_t *cu = cuda_ctx(NULL);
    if (!cu) return;
    gln_comm_t *c = comm_new(cu, kind);
    if (!c) return;
    CHECK(gln_comm_context(c) == cu && gln_comm_size(c) == 1 && gln_comm_rank(c) == 0);
    enum { N = 3001 };
    float *h = malloc(N * sizeof(float));
    gln_rng_t r = gln_rng_seed(11);
    for (int i = 0; i < N; i++) h[i] = (float)gln_rng_normal(&r);
    float *send = dev_upload(cu, h, N * sizeof(float)), *recv = NULL;
    CHECK_OK(gln_malloc(cu, N * sizeof(float), (void **)&recv));
    const char *name = kind_names[kind];
    char what[96];
    for (int op = 0; op < 6; op++) {
        CHECK_OK(cu->ops->memset(cu, recv, 0xFF, N * sizeof(float)));
        void *req = NULL;
        switch (op) {
        case 0: CHECK_OK(gln_comm_allgather(c, send, recv, N, GLN_DTYPE_FP32)); break;
        case 1: CHECK_OK(gln_comm_reduce_scatter(c, send, recv, N, GLN_DTYPE_FP32, GLN_REDUCE_SUM)); break;
        case 2: CHECK_OK(gln_comm_allreduce(c, send, recv, N, GLN_DTYPE_FP32, GLN_REDUCE_MAX)); break;
        case 3:
            CHECK_OK(gln_comm_allgather_start_agreed(c, send, recv, N, GLN_DTYPE_FP32, &req));
            CHECK_OK(gln_comm_wait(c, req));
            break;
        case 4:
            CHECK_OK(gln_comm_reduce_scatter_start_agreed(c, send, recv, N, GLN_DTYPE_FP32, GLN_REDUCE_SUM, &req));
            CHECK_OK(gln_comm_wait(c, req));
            break;
        case 5: /* in place */
            CHECK_OK(gln_memcpy(cu, recv, send, N * sizeof(float), GLN_COPY_BACKEND_TO_BACKEND));
            CHECK_OK(gln_comm_allreduce(c, recv, recv, N, GLN_DTYPE_FP32, GLN_REDUCE_SUM));
            break;
        }
        float *got = dev_download(cu, recv, N * sizeof(float));
        snprintf(what, sizeof what, "%s: collective %d over one rank returns the data", name, op);
        gln_check_bitwise(what, got, h, N * sizeof(float));
        free(got);
    }
    CHECK_OK(gln_comm_barrier(c));
    /* MPI takes a CUDA context (tests/mpi/cuda_sharded_layer.c runs it); this process never
     * initialized MPI, so creation fails cleanly here.  A host communicator cannot serve a CUDA
     * group. */
    gln_comm_t *m = NULL;
    CHECK_STATUS(gln_comm_create_mpi(cu, NULL, &m),
                 gln_mpi_available() ? GLN_STATUS_INVALID_STATE : GLN_STATUS_NOT_SUPPORTED, "MPI");
    CHECK(m == NULL);
    gln_comm_t *host = NULL;
    CHECK_OK(gln_comm_create_self(NULL, &host));
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = NE, sc.out_features = KOUT, sc.in_features = KIN;
    gln_sharded_weights_t *sw = NULL;
    CHECK_STATUS(gln_sharded_weights_create(cu, host, &sc, &sw), GLN_STATUS_INVALID_ARGUMENT, "bound to");
    CHECK(sw == NULL);
    CHECK_OK(gln_comm_destroy(host));
    CHECK_OK(gln_free(cu, send));
    CHECK_OK(gln_free(cu, recv));
    free(h);
    CHECK_OK(gln_comm_destroy(c));
    CHECK_OK(gln_context_async_error(cu));
    CHECK_OK(gln_context_destroy(cu));
}

static void test_comm_device(void) {
    if (!gln_nccl_available()) printf("note: built without NCCL; the self communicator on the GPU only\n");
    for (int k = 0; k < num_kinds(); k++) comm_device((comm_kind_t)k);
}

/* ---- a sharded layer vs a plain layer on the GPU ------------------------------------------- */

typedef struct variant {
    const char *name;
    gln_recipe_t recipe;
    int pow2, prefetch, async, fp8g, exact;
} variant_t;

static const variant_t kVariants[] = {
    {"bf16", GLN_RECIPE_NONE, 0, 0, 0, 0, 1},
    {"bf16 prefetch async", GLN_RECIPE_NONE, 0, 1, 1, 0, 1},
    {"fp8-current/pow2 fp8-gather prefetch async", GLN_RECIPE_FP8_CURRENT, 1, 1, 1, 1, 1},
    {"fp8-current fp8-gather", GLN_RECIPE_FP8_CURRENT, 0, 0, 0, 1, 0},
    {"mxfp8 prefetch", GLN_RECIPE_MXFP8, 0, 1, 0, 0, 1},
    {"mxfp8 fp8-gather prefetch async", GLN_RECIPE_MXFP8, 0, 1, 1, 1, 1},
    {"fp8-block async", GLN_RECIPE_FP8_BLOCK, 0, 0, 1, 0, 1},
    {"fp8-block fp8-gather prefetch", GLN_RECIPE_FP8_BLOCK, 0, 1, 0, 1, 1},
};

typedef struct bufs {
    void *x, *dy, *y, *dx;
    int64_t *splits;
} bufs_t;

static void bufs_new(gln_context_t *cu, bufs_t *b, uint64_t seed) {
    void *xh = malloc((size_t)ROWS * KIN * 2), *dyh = malloc((size_t)ROWS * KOUT * 2);
    fill_ints(xh, GLN_DTYPE_BF16, (size_t)ROWS * KIN, seed);
    fill_ints(dyh, GLN_DTYPE_BF16, (size_t)ROWS * KOUT, seed + 1);
    b->x = dev_upload(cu, xh, (size_t)ROWS * KIN * 2);
    b->dy = dev_upload(cu, dyh, (size_t)ROWS * KOUT * 2);
    b->splits = dev_upload(cu, k_splits, sizeof k_splits);
    CHECK_OK(gln_malloc(cu, (size_t)ROWS * KOUT * 2, &b->y));
    CHECK_OK(gln_malloc(cu, (size_t)ROWS * KIN * 2, &b->dx));
    free(xh), free(dyh);
}

static void bufs_free(gln_context_t *cu, bufs_t *b) {
    CHECK_OK(gln_free(cu, b->x));
    CHECK_OK(gln_free(cu, b->dy));
    CHECK_OK(gln_free(cu, b->y));
    CHECK_OK(gln_free(cu, b->dx));
    CHECK_OK(gln_free(cu, b->splits));
}

static void layer_config(const variant_t *v, gln_grouped_linear_config_t *c) {
    gln_grouped_linear_config_t def = GLN_GROUPED_LINEAR_CONFIG_INIT;
    *c = def;
    c->num_experts = NE;
    c->in_features = KIN;
    c->out_features = KOUT;
    c->bias = 0;
    c->recipe = v->recipe;
    c->power_2_scales = v->pow2;
    c->path = GLN_PATH_GROUPED;
}

/* A sharded group + layer on `cu`, loaded with `full`. */
typedef struct sharded {
    gln_comm_t *comm;
    gln_sharded_weights_t *sw;
    const gln_dist_weights_t *p;
    gln_grouped_linear_t *L;
} sharded_t;

static int sharded_new(gln_context_t *cu, comm_kind_t kind, const variant_t *v, const float *full,
                       sharded_t *s) {
    memset(s, 0, sizeof *s);
    s->comm = comm_new(cu, kind);
    if (!s->comm) return 0;
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = NE, sc.out_features = KOUT, sc.in_features = KIN;
    sc.async_finalize = v->async;
    sc.fp8_gather = v->fp8g;
    sc.fp8_quant.mode = v->recipe == GLN_RECIPE_MXFP8       ? GLN_SCALING_MXFP8_1D
                        : v->recipe == GLN_RECIPE_FP8_BLOCK ? GLN_SCALING_BLOCK_2D
                                                            : GLN_SCALING_TENSOR;
    sc.fp8_quant.fp8_dtype = GLN_DTYPE_FP8_E4M3;
    /* the recipe's weight quantizer: FP8 block makes power-of-two scales (block_fp32_scales 0) */
    sc.fp8_quant.power_2_scale = v->recipe == GLN_RECIPE_FP8_BLOCK ? 1 : v->pow2;
    CHECK_OK(gln_sharded_weights_create(cu, s->comm, &sc, &s->sw));
    if (!s->sw) return 0;
    CHECK_OK(gln_sharded_weights_load_full(s->sw, full));
    s->p = gln_sharded_weights_protocol(s->sw);
    gln_grouped_linear_config_t c;
    layer_config(v, &c);
    c.params.distributed = s->p;
    CHECK_OK(gln_grouped_linear_create(cu, &c, &s->L));
    return s->L != NULL;
}

static void sharded_free(sharded_t *s) {
    CHECK_OK(gln_grouped_linear_destroy(s->L));
    CHECK_OK(gln_sharded_weights_destroy(s->sw));
    CHECK_OK(gln_comm_destroy(s->comm));
}

/* One step on the context's stream; pf: the protocol to prefetch through (NULL: none). */
static gln_status_t run_step(gln_grouped_linear_t *L, const gln_dist_weights_t *pf, const bufs_t *b,
                             gln_microbatch_t mb) {
    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KIN, b->x);
    gln_tensor_t y = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KOUT, b->y);
    gln_tensor_t dy = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KOUT, b->dy);
    gln_tensor_t dx = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KIN, b->dx);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &x;
    a.m_splits = b->splits;
    a.splits_on_backend = 1;
    a.y = &y;
    a.microbatch = mb;
    a.input_requires_grad = 1;
    gln_grouped_linear_saved_t *saved = NULL;
    gln_status_t st = pf ? pf->prefetch(pf->impl, 0) : GLN_STATUS_SUCCESS;
    if (st == GLN_STATUS_SUCCESS) st = gln_grouped_linear_forward(L, &a, &saved);
    if (st == GLN_STATUS_SUCCESS && pf) st = pf->prefetch(pf->impl, 1);
    if (st == GLN_STATUS_SUCCESS) st = gln_grouped_linear_backward(saved, &dy, &dx);
    if (saved) {
        gln_status_t rs = gln_grouped_linear_saved_release(saved);
        if (st == GLN_STATUS_SUCCESS) st = rs;
    }
    return st;
}

static void poison_outputs(gln_context_t *cu, const bufs_t *b) {
    CHECK_OK(cu->ops->memset(cu, b->y, 0xFF, (size_t)ROWS * KOUT * 2));
    CHECK_OK(cu->ops->memset(cu, b->dx, 0xFF, (size_t)ROWS * KIN * 2));
}

static void compare_outputs(gln_context_t *cu, const char *what, const bufs_t *a, const bufs_t *b) {
    char name[160];
    void *ya = dev_download(cu, a->y, (size_t)ROWS * KOUT * 2), *yb = dev_download(cu, b->y, (size_t)ROWS * KOUT * 2);
    void *da = dev_download(cu, a->dx, (size_t)ROWS * KIN * 2), *db = dev_download(cu, b->dx, (size_t)ROWS * KIN * 2);
    snprintf(name, sizeof name, "%s: y", what);
    gln_check_bitwise(name, ya, yb, (size_t)ROWS * KOUT * 2);
    snprintf(name, sizeof name, "%s: dx", what);
    gln_check_bitwise(name, da, db, (size_t)ROWS * KIN * 2);
    free(ya), free(yb), free(da), free(db);
}

static void layer_case(comm_kind_t kind, const variant_t *v) {
    gln_context_t *cu = cuda_ctx(NULL);
    if (!cu) return;
    char what[160];
    float *full = malloc((size_t)TOTAL * sizeof(float));
    fill_ints(full, GLN_DTYPE_FP32, (size_t)TOTAL, 17);
    void *wh = malloc((size_t)TOTAL * 2);
    for (int64_t i = 0; i < TOTAL; i++) gln_store(wh, GLN_DTYPE_BF16, (size_t)i, full[i]);
    void *wd = dev_upload(cu, wh, (size_t)TOTAL * 2);
    float *mgd = NULL;
    CHECK_OK(gln_malloc(cu, (size_t)TOTAL * sizeof(float), (void **)&mgd));
    void *wp[NE];
    float *mp[NE];
    for (int e = 0; e < NE; e++) {
        wp[e] = (char *)wd + (size_t)e * KOUT * KIN * 2;
        mp[e] = mgd + (size_t)e * KOUT * KIN;
    }
    gln_grouped_linear_config_t c;
    layer_config(v, &c);
    c.params.weights = wp;
    c.params.main_grads = mp;
    c.fuse_wgrad_accumulation = 1;
    gln_grouped_linear_t *plain = NULL;
    CHECK_OK(gln_grouped_linear_create(cu, &c, &plain));
    sharded_t s;
    if (!plain || !sharded_new(cu, kind, v, full, &s)) goto out;
    bufs_t bs, bp;
    bufs_new(cu, &bs, 23);
    bufs_new(cu, &bp, 23);
    for (int step = 0; step < 2; step++) {
        gln_microbatch_t mb = step ? GLN_MICROBATCH_NEXT : GLN_MICROBATCH_FIRST;
        poison_outputs(cu, &bs);
        poison_outputs(cu, &bp);
        CHECK_OK(run_step(s.L, v->prefetch ? s.p : NULL, &bs, mb));
        CHECK_OK(run_step(plain, NULL, &bp, mb));
        snprintf(what, sizeof what, "%s %s step %d sharded vs plain", kind_names[kind], v->name, step);
        compare_outputs(cu, what, &bs, &bp);
        /* one gathered group at a time: the bf16 flat weights of the one rank (with the 128x128
         * FP8 gather, experts padded to 128-row multiples in that layout) */
        size_t live = 1, peak = 0;
        int64_t shard_len = 0;
        CHECK_OK(gln_sharded_weights_materialized_bytes(s.sw, &live, &peak));
        CHECK_OK(gln_sharded_weights_shard(s.sw, NULL, NULL, &shard_len, NULL));
        CHECK_MSG(shard_len >= TOTAL, "%s: shard of %lld elements, expected at least %lld", what,
                  (long long)shard_len, (long long)TOTAL);
        CHECK_MSG(live == 0 && peak == (size_t)shard_len * 2, "%s: live %zu peak %zu, expected 0 and %zu",
                  what, live, peak, (size_t)shard_len * 2);
    }
    CHECK_OK(gln_sharded_weights_wait(s.sw));
    if (v->exact) {
        float *got = malloc((size_t)TOTAL * sizeof(float));
        CHECK_OK(gln_sharded_weights_gather_main_grad(s.sw, got));
        float *ref = dev_download(cu, mgd, (size_t)TOTAL * sizeof(float));
        snprintf(what, sizeof what, "%s %s: main_grad after overwrite + accumulate", kind_names[kind], v->name);
        gln_check_bitwise(what, got, ref, (size_t)TOTAL * sizeof(float));
        free(got), free(ref);
    }
    bufs_free(cu, &bs);
    bufs_free(cu, &bp);
    sharded_free(&s);
out:
    CHECK_OK(gln_grouped_linear_destroy(plain));
    CHECK_OK(gln_free(cu, wd));
    CHECK_OK(gln_free(cu, mgd));
    free(full), free(wh);
    CHECK_OK(gln_context_async_error(cu));
    CHECK_OK(gln_context_destroy(cu));
}

static void test_layer_on_device(void) {
    for (int k = 0; k < num_kinds(); k++)
        for (size_t i = 0; i < sizeof kVariants / sizeof kVariants[0]; i++) layer_case((comm_kind_t)k, &kVariants[i]);
}

/* ---- graph capture of a sharded step -------------------------------------------------------- */

static void capture_case(comm_kind_t kind, const variant_t *v) {
    cudaStream_t user;
    CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    gln_context_t *cu = cuda_ctx(user);
    if (!cu) return;
    float *full = malloc((size_t)TOTAL * sizeof(float));
    fill_ints(full, GLN_DTYPE_FP32, (size_t)TOTAL, 31);
    sharded_t e, g;
    bufs_t be, bg;
    bufs_new(cu, &be, 41);
    bufs_new(cu, &bg, 41);
    char what[160];
    if (!sharded_new(cu, kind, v, full, &e) || !sharded_new(cu, kind, v, full, &g)) goto out;
    /* warm-up outside the capture: the first step allocates the group's gradient buffers and
     * fills its free list of gather buffers */
    CHECK_OK(run_step(g.L, v->prefetch ? g.p : NULL, &bg, GLN_MICROBATCH_FIRST));
    CHECK_OK(gln_sharded_weights_wait(g.sw));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(user, cudaStreamCaptureModeGlobal) == cudaSuccess);
    gln_status_t st = run_step(g.L, v->prefetch ? g.p : NULL, &bg, GLN_MICROBATCH_FIRST);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", st == GLN_STATUS_SUCCESS ? "" : gln_last_error());
    if (st == GLN_STATUS_SUCCESS) st = g.p->wait(g.p->impl); /* joins the finalize back into the capture */
    cudaError_t end = cudaStreamEndCapture(user, &graph);
    CHECK_MSG(st == GLN_STATUS_SUCCESS, "%s %s: capture of a sharded step failed: %s", kind_names[kind], v->name, msg);
    CHECK_MSG(end == cudaSuccess, "%s %s: cudaStreamEndCapture: %s (a call broke the capture)", kind_names[kind],
              v->name, cudaGetErrorString(end));
    if (graph) CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    (void)cudaGetLastError();
    for (int replay = 0; replay < 3 && exec; replay++) {
        poison_outputs(cu, &be);
        poison_outputs(cu, &bg);
        CHECK_OK(run_step(e.L, v->prefetch ? e.p : NULL, &be, GLN_MICROBATCH_FIRST));
        CHECK_OK(gln_sharded_weights_wait(e.sw));
        CHECK(cudaGraphLaunch(exec, user) == cudaSuccess);
        snprintf(what, sizeof what, "%s %s replay %d vs eager", kind_names[kind], v->name, replay);
        compare_outputs(cu, what, &bg, &be);
        float *mg = malloc((size_t)TOTAL * sizeof(float)), *me = malloc((size_t)TOTAL * sizeof(float));
        CHECK_OK(gln_sharded_weights_gather_main_grad(g.sw, mg));
        CHECK_OK(gln_sharded_weights_gather_main_grad(e.sw, me));
        snprintf(what, sizeof what, "%s %s replay %d: main_grad vs eager", kind_names[kind], v->name, replay);
        gln_check_bitwise(what, mg, me, (size_t)TOTAL * sizeof(float));
        free(mg), free(me);
        size_t live = 1;
        CHECK_OK(gln_sharded_weights_materialized_bytes(g.sw, &live, NULL));
        CHECK_MSG(live == 0, "%s: %zu gathered bytes alive after a replay", what, live);
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    sharded_free(&e);
    sharded_free(&g);
out:
    bufs_free(cu, &be);
    bufs_free(cu, &bg);
    free(full);
    CHECK_OK(gln_context_async_error(cu));
    CHECK_OK(gln_context_destroy(cu));
    cudaStreamDestroy(user);
}

static void test_capture_sharded_step(void) {
    for (int k = 0; k < num_kinds(); k++) {
        capture_case((comm_kind_t)k, &kVariants[1]); /* bf16, prefetch, async finalize */
        capture_case((comm_kind_t)k, &kVariants[2]); /* FP8 all-gather, prefetch, async finalize */
        capture_case((comm_kind_t)k, &kVariants[5]); /* MXFP8 all-gather, prefetch, async finalize */
    }
}
#endif

int main(int argc, char **argv) {
    if (!gln_backend_available(GLN_BACKEND_CUDA)) {
        printf("skipped: the CUDA backend is not available (not compiled in, or no device)\n");
        return 77;
    }
#if defined(GLN_TEST_HAVE_CUDA)
    static const gln_test_case_t cases[] = {
        GLN_CASE(test_dist_kernels),
        GLN_CASE(test_comm_device),
        GLN_CASE(test_layer_on_device),
        GLN_CASE(test_capture_sharded_step),
    };
    return gln_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
#else
    (void)argc, (void)argv;
    return 77;
#endif
}

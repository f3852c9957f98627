/* GPU quantization benchmark: per-tensor FP8 (current scaling rowwise, current rowwise +
 * transposed, delayed rowwise + transposed), MXFP8 (rowwise + columnwise) and FP8 block scaling
 * (1x128 and 128x128 blocks, power-of-two scales, rowwise + transposed) on the CUDA backend,
 * through the public API only (gln_quantize, gln_grouped_quantize).
 *
 * Sizes: one 16384 x 8192 tensor, and the x, dy and expert weights of the MoE shapes
 * (Mixtral FC1 E8 T4096 K4096 N14336, DeepSeek-like E32 T512 K7168 N2048,
 * Qwen3-like E128 T128 K2048 N768), x and dy as grouped tensors of E members with uniform device
 * splits, the weights as a grouped tensor of E members [N, K].  Then the grouped-launch check:
 * the 128 Qwen3-like weights grouped (host and device splits) against the same bytes as one
 * tensor (a grouped launch should cost about what one tensor of the same bytes does).
 *
 * Figures: useful GB/s = (input read once + every output byte written once, scales included) /
 * time, and that over the bandwidth of a device-to-device copy (bytes read + written) measured in
 * the same run.  Time: CUDA events around each call on the context's stream, median of `repeat`
 * calls after `warmup`; inputs below 128 MB rotate over enough copies that a call never finds its
 * input in the 50 MB L2.
 *
 * --torch "CMD": after our runs, run `CMD ROWS COLS ...` (bench/peer_torch_quant.py: torch eager
 * and torch.compile per-tensor current scaling, R and R+T, and a torch device copy) on the same
 * GPU for 16384 x 8192 and the packed x of each MoE shape, and print ours against it: our
 * tensor-current R / R+T GB/s over torch's (eager, torch.compile), the ratio we aim at
 * (>= 2.5x torch.compile for R+T).  E.g. --torch "/work/main/.venv/bin/python bench/peer_torch_quant.py".
 * The CUDA backend runs its TMA quantize kernels where they apply and its general ones elsewhere;
 * in the environment, GLN_CUDA_QUANT_GRID=N caps every quantize grid at N blocks and GLN_CUDA_PDL=0
 * launches without programmatic dependent launch (both printed), to measure what each gains.
 *
 * Each line gives the share of the 512 MB copy's bandwidth and of a copy of the problem's own bytes
 * (the small MoE tensors cannot reach the large copy's rate: neither can a copy of their size).
 * --shape ROWSxCOLS (up to 8) adds single tensors after 16384 x 8192.
 * --splits KIND: the members of the MoE shapes' x and dy, one of bench_util.h's sets (default
 * uniform; router: the unaligned counts a router gives, which cut MXFP8's 32-row and the 1x128
 * columnwise 128-row blocks mid-block); the weights stay E members of N rows.
 *
 * usage: gpu_quantize [--repeat N] [--warmup N] [--dtype bf16|fp16|fp32] [--only SUBSTRING]
 *                     [--torch CMD] [--shape ROWSxCOLS]... [--back-to-back | --gated]
 *                     [--splits uniform|zipf|empty|router|random]   (exit 77 without a GPU) */
#include "bench_util.h" /* first: it sets _POSIX_C_SOURCE */

#include <cuda_runtime.h>

#define ROTATE_BYTES ((size_t)128 << 20)

static int g_repeat = 30, g_warmup = 5;
static int g_batch = 1; /* --back-to-back: calls per timed sample (B2B_CALLS) */
static int g_gated = 0; /* --gated: the sample's calls held behind a host gate until all are enqueued */
#define B2B_CALLS 10
static const char *g_only = NULL, *g_torch = NULL;
static bench_splits_t g_splits = SPLITS_UNIFORM; /* --splits: the MoE shapes' x and dy members */

static void cuda_try(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

/* ---- timing ------------------------------------------------------------------------------------ */

typedef void (*call_fn)(void *arg, int k);

/* Median milliseconds of one call of fn(arg, k) (k = the call's index, for rotating inputs).  By
 * default each sample is one call between two events on an idle device, so it includes the
 * host's launch path of the call (the device waits for it); with --back-to-back a sample is
 * B2B_CALLS calls enqueued one after another (the host runs ahead of the device, as in a training
 * step) and the time per call is the sample's tenth: what the device itself takes, the gaps
 * between a call's dependent kernels included — except that the first call's host launch path
 * still runs while the device idles after the start event.  --gated removes that too: the
 * stream first waits on a host function that spins until every call of the sample (and the end
 * event) is enqueued, so the device runs the sample without waiting for the host at all. */
static int g_gate_open;
static int g_gate_timed_out;
static void CUDART_CB gate_wait(void *unused) {
    (void)unused;
    const double t0 = now_s();
    while (!__atomic_load_n(&g_gate_open, __ATOMIC_ACQUIRE))
        if (now_s() - t0 > 5.0) { /* a call that waited for the stream would never open it */
            __atomic_store_n(&g_gate_timed_out, 1, __ATOMIC_RELEASE);
            return;
        }
}

static double median_ms(gln_context_t *ctx, call_fn fn, void *arg) {
    cudaStream_t st = (cudaStream_t)gln_context_stream(ctx);
    cudaEvent_t a, b;
    cuda_try(cudaEventCreate(&a), "cudaEventCreate");
    cuda_try(cudaEventCreate(&b), "cudaEventCreate");
    for (int i = 0; i < g_warmup; i++) fn(arg, i);
    TRY(gln_synchronize(ctx));
    double *t = malloc((size_t)g_repeat * sizeof *t);
    for (int r = 0; r < g_repeat; r++) {
        if (g_gated) {
            __atomic_store_n(&g_gate_open, 0, __ATOMIC_RELEASE);
            cuda_try(cudaLaunchHostFunc(st, gate_wait, NULL), "cudaLaunchHostFunc");
        }
        cuda_try(cudaEventRecord(a, st), "cudaEventRecord");
        for (int c = 0; c < g_batch; c++) fn(arg, g_warmup + r * g_batch + c);
        cuda_try(cudaEventRecord(b, st), "cudaEventRecord");
        if (g_gated) __atomic_store_n(&g_gate_open, 1, __ATOMIC_RELEASE);
        cuda_try(cudaEventSynchronize(b), "cudaEventSynchronize");
        float ms = 0.0f;
        cuda_try(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
        t[r] = ms / g_batch;
    }
    if (__atomic_load_n(&g_gate_timed_out, __ATOMIC_ACQUIRE)) {
        fprintf(stderr, "gpu_quantize: --gated: a call waited for the stream behind the gate (5 s)\n");
        exit(1);
    }
    qsort(t, (size_t)g_repeat, sizeof *t, cmp_double);
    const double m = t[g_repeat / 2];
    free(t);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return m;
}

/* ---- the copy ceiling ---------------------------------------------------------------------------- */

typedef struct copy_arg {
    gln_context_t *ctx;
    void *src, *dst;
    size_t bytes;
    int nsrc; /* sources rotated as the problems rotate their inputs: src + (k % nsrc) · bytes */
} copy_arg_t;

static void copy_call(void *p, int k) {
    copy_arg_t *c = p;
    TRY(gln_memcpy(c->ctx, c->dst, (char *)c->src + (size_t)(k % c->nsrc) * c->bytes, c->bytes,
                   GLN_COPY_BACKEND_TO_BACKEND));
}

/* Device-to-device copy bandwidth of `bytes`, GB/s of bytes read + written.  The ceiling is a copy
 * of 512 MB (far past L2); a copy of a problem's own bytes (half its useful bytes read from
 * rotating sources, as the problem reads its inputs, half written to one destination, as the
 * problem writes its outputs) says what a pass over that little data reaches at all, launch and
 * tail included. */
static double copy_gbps(gln_context_t *ctx, size_t bytes) {
    copy_arg_t c = {ctx, NULL, NULL, (bytes + 15) / 16 * 16, 1};
    c.nsrc = c.bytes >= ROTATE_BYTES ? 1 : (int)((ROTATE_BYTES + c.bytes - 1) / c.bytes);
    c.src = device_random_fast(ctx, GLN_DTYPE_BF16, (size_t)c.nsrc * c.bytes / 2, 1);
    TRY(gln_malloc(ctx, c.bytes, &c.dst));
    const double ms = median_ms(ctx, copy_call, &c);
    TRY(gln_free(ctx, c.src));
    TRY(gln_free(ctx, c.dst));
    return 2.0 * (double)c.bytes / (ms * 1e6);
}

/* ---- one quantization problem ----------------------------------------------------------------- */

typedef enum kind { K_CUR_R, K_CUR_RT, K_DEL_RT, K_MX_RC, K_BLK1_RT, K_BLK2_RT, K_COUNT } kind_t;
static const char *kind_names[] = {"tensor-current R", "tensor-current R+T", "tensor-delayed R+T", "mxfp8 R+C",
                                   "block 1x128 R+T",  "block 128x128 R+T"};

typedef struct problem {
    gln_context_t *ctx;
    gln_quant_config_t cfg;
    gln_dtype_t dtype;
    int32_t num;                /* 0: one tensor through gln_quantize; else grouped members */
    int64_t rows, cols;
    int64_t *splits;            /* host [num] */
    void *splits_dev;           /* device copy */
    int device_splits;
    int nx;                     /* rotating inputs */
    void **x;
    void *q, *qt, *s, *cs;
    float *amax, *scale;        /* [max(num, 1)] */
    size_t useful_bytes;
} problem_t;

static gln_quant_config_t kind_cfg(kind_t k) {
    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    c.mode = k == K_MX_RC     ? GLN_SCALING_MXFP8_1D
             : k == K_BLK1_RT ? GLN_SCALING_BLOCK_1D
             : k == K_BLK2_RT ? GLN_SCALING_BLOCK_2D
                              : GLN_SCALING_TENSOR;
    c.power_2_scale = k == K_BLK1_RT || k == K_BLK2_RT; /* DeepSeek-style block recipes */
    c.rowwise = 1;
    c.columnwise = k != K_CUR_R;
    c.delayed = k == K_DEL_RT;
    return c;
}

/* rows over num members: uniform (the remainder one row at a time), else bench_util.h's set `kind`
 * (the rows past num · (rows / num) to member 0). */
static void member_splits(bench_splits_t kind, int32_t num, int64_t rows, int64_t *splits) {
    if (kind == SPLITS_UNIFORM) {
        for (int32_t i = 0; i < num; i++) splits[i] = rows / num + (i < rows % num);
        return;
    }
    bench_make_splits(kind, splits, num, rows / num);
    splits[0] += rows % num;
}

static void problem_init(gln_context_t *ctx, problem_t *p, kind_t k, gln_dtype_t dt, int32_t num, int64_t rows,
                         int64_t cols, int device_splits, bench_splits_t kind) {
    memset(p, 0, sizeof *p);
    p->ctx = ctx, p->cfg = kind_cfg(k), p->dtype = dt, p->num = num, p->rows = rows, p->cols = cols;
    p->device_splits = device_splits;
    const size_t es = dt == GLN_DTYPE_FP32 ? 4 : 2, n = (size_t)rows * (size_t)cols, in_bytes = n * es;
    p->nx = in_bytes >= ROTATE_BYTES ? 1 : (int)((ROTATE_BYTES + in_bytes - 1) / in_bytes);
    p->x = malloc((size_t)p->nx * sizeof *p->x);
    for (int i = 0; i < p->nx; i++) p->x[i] = device_random(ctx, dt, n, 7 + (uint64_t)i);
    const int32_t members = num ? num : 1;
    int64_t sr = 1, sc = 1;
    if (num) {
        p->splits = malloc((size_t)num * sizeof *p->splits);
        member_splits(kind, num, rows, p->splits);
        TRY(gln_malloc(ctx, (size_t)num * sizeof(int64_t), &p->splits_dev));
        TRY(gln_memcpy(ctx, p->splits_dev, p->splits, (size_t)num * sizeof(int64_t), GLN_COPY_HOST_TO_BACKEND));
        TRY(gln_grouped_scale_bound(p->cfg.mode, num, rows, cols, &sr, &sc));
    } else {
        gln_quant_layout_t l;
        TRY(gln_quant_layout(p->cfg.mode, p->cfg.fp8_dtype, rows, cols, &l));
        sr = (int64_t)(l.scale_bytes / (p->cfg.mode == GLN_SCALING_MXFP8_1D ? 1 : 4));
        sc = (int64_t)(l.col_scale_bytes / (p->cfg.mode == GLN_SCALING_MXFP8_1D ? 1 : 4));
    }
    const size_t ses = p->cfg.mode == GLN_SCALING_MXFP8_1D ? 1 : 4;
    TRY(gln_malloc(ctx, n, &p->q));
    TRY(gln_malloc(ctx, (size_t)sr * ses, &p->s));
    p->useful_bytes = in_bytes + n + (size_t)sr * ses;
    if (p->cfg.columnwise) {
        TRY(gln_malloc(ctx, n, &p->qt));
        TRY(gln_malloc(ctx, (size_t)sc * ses, &p->cs));
        p->useful_bytes += n + (size_t)sc * ses;
    }
    float *h = malloc((size_t)members * sizeof *h);
    TRY(gln_malloc(ctx, (size_t)members * sizeof(float), (void **)&p->amax));
    TRY(gln_malloc(ctx, (size_t)members * sizeof(float), (void **)&p->scale));
    for (int32_t i = 0; i < members; i++) h[i] = 0.0f;
    TRY(gln_memcpy(ctx, p->amax, h, (size_t)members * sizeof(float), GLN_COPY_HOST_TO_BACKEND));
    for (int32_t i = 0; i < members; i++) h[i] = 64.0f; /* delayed: a scale that keeps |x| < 1 in range */
    TRY(gln_memcpy(ctx, p->scale, h, (size_t)members * sizeof(float), GLN_COPY_HOST_TO_BACKEND));
    free(h);
}

static void problem_free(problem_t *p) {
    for (int i = 0; i < p->nx; i++) TRY(gln_free(p->ctx, p->x[i]));
    void *bufs[] = {p->q, p->qt, p->s, p->cs, p->amax, p->scale, p->splits_dev};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) TRY(gln_free(p->ctx, bufs[i]));
    free(p->x);
    free(p->splits);
}

static void quantize_call(void *arg, int k) {
    problem_t *p = arg;
    gln_tensor_t in = gln_tensor_make(p->dtype, p->rows, p->cols, p->x[k % p->nx]);
    gln_tensor_t out = {p->cfg.fp8_dtype, p->rows, p->cols, p->q, p->cfg.mode, p->s, p->qt, p->cs, p->amax, p->scale};
    if (!p->num) {
        TRY(gln_quantize(p->ctx, &p->cfg, &in, &out));
        return;
    }
    const int64_t *sp = p->device_splits ? (const int64_t *)p->splits_dev : p->splits;
    gln_grouped_tensor_t gi = {p->num, sp, p->device_splits, in};
    gln_grouped_tensor_t go = {p->num, sp, p->device_splits, out};
    TRY(gln_grouped_quantize(p->ctx, &p->cfg, &gi, &go));
}

/* Our tensor-current R and R+T GB/s per shape, for the torch comparison. */
#define MAX_PEER 8
typedef struct peer_shape {
    int64_t rows, cols;
    double ours[2]; /* R, R+T */
} peer_shape_t;
static peer_shape_t g_peer[MAX_PEER];
static int g_npeer = 0;

static void peer_note(int64_t rows, int64_t cols, kind_t k, double gbps) {
    if (k != K_CUR_R && k != K_CUR_RT) return;
    int i = 0;
    while (i < g_npeer && !(g_peer[i].rows == rows && g_peer[i].cols == cols)) i++;
    if (i == g_npeer) {
        if (g_npeer == MAX_PEER) return;
        g_peer[g_npeer++] = (peer_shape_t){rows, cols, {0.0, 0.0}};
    }
    g_peer[i].ours[k == K_CUR_RT] = gbps;
}

/* Run the torch peer on every noted shape and print ours against it. */
static void torch_compare(void) {
    char cmd[2048];
    size_t used = (size_t)snprintf(cmd, sizeof cmd, "%s", g_torch);
    for (int i = 0; i < g_npeer && used < sizeof cmd; i++)
        used += (size_t)snprintf(cmd + used, sizeof cmd - used, " %lld %lld", (long long)g_peer[i].rows,
                                 (long long)g_peer[i].cols);
    printf("torch peer: %s\n", cmd);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) {
        printf("  could not start the torch peer\n");
        return;
    }
    char line[512];
    while (fgets(line, sizeof line, p)) {
        char what[16], mode[16];
        long long rows = 0, cols = 0;
        double us = 0.0, gbps = 0.0;
        if (sscanf(line, "peer %15s %15s %lld %lld %lf %lf", what, mode, &rows, &cols, &us, &gbps) != 6) {
            printf("  %s", line); /* the peer's own lines */
            continue;
        }
        const int rt = !strcmp(what, "R+T");
        if (!strcmp(what, "copy") || gbps <= 0.0) continue;
        for (int i = 0; i < g_npeer; i++)
            if (g_peer[i].rows == rows && g_peer[i].cols == cols && g_peer[i].ours[rt] > 0.0)
                printf("  [%lld, %lld] %-4s ours %6.0f GB/s / torch %-7s %6.0f GB/s = %5.2fx%s\n", rows, cols, what,
                       g_peer[i].ours[rt], mode, gbps, g_peer[i].ours[rt] / gbps,
                       rt && !strcmp(mode, "compile") ? "  (target >= 2.5x)" : "");
    }
    const int rc = pclose(p);
    if (rc != 0) printf("  the torch peer exited with status %d\n", rc);
}

/* Time one problem and print its line; returns the median ms. */
static double run(gln_context_t *ctx, const char *label, kind_t k, gln_dtype_t dt, int32_t num, int64_t rows,
                  int64_t cols, int device_splits, bench_splits_t splits, double copy) {
    char name[200];
    snprintf(name, sizeof name, "%-22s %-18s", label, kind_names[k]);
    if (g_only && !strstr(name, g_only)) return 0.0;
    problem_t p;
    problem_init(ctx, &p, k, dt, num, rows, cols, device_splits, splits);
    const double ms = median_ms(ctx, quantize_call, &p);
    const double gbps = (double)p.useful_bytes / (ms * 1e6);
    char shape[64];
    if (num) snprintf(shape, sizeof shape, "%d x [%lld, %lld]%s%s%s", (int)num, (long long)(rows / num), (long long)cols,
                      device_splits ? " dev" : " host", splits == SPLITS_UNIFORM ? "" : " ",
                      splits == SPLITS_UNIFORM ? "" : bench_splits_names[splits]);
    else snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)rows, (long long)cols);
    const double same = copy_gbps(ctx, p.useful_bytes / 2); /* a copy of the same bytes */
    printf("%s %-26s %9.1f us %8.0f GB/s %6.1f%% of copy %6.1f%% of a same-size copy\n", name, shape, ms * 1e3, gbps,
           100.0 * gbps / copy, 100.0 * gbps / same);
    if (!device_splits && num == 0 && rows == 16384) peer_note(rows, cols, k, gbps);
    if (device_splits && strstr(label, " x")) peer_note(rows, cols, k, gbps); /* the packed x of a MoE shape */
    fflush(stdout);
    problem_free(&p);
    return ms;
}

typedef struct moe {
    const char *name;
    int32_t experts;
    int64_t tokens, k, n; /* tokens per expert, hidden (K_in), expert FFN (K_out) */
} moe_t;

static const moe_t moes[] = {
    {"mixtral-fc1", 8, 4096, 4096, 14336}, {"deepseek", 32, 512, 7168, 2048}, {"qwen3", 128, 128, 2048, 768}};

int main(int argc, char **argv) {
    gln_dtype_t dt = GLN_DTYPE_BF16;
    long long shapes[8][2]; /* --shape: more single tensors after 16384 x 8192 */
    int nshapes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) g_repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) g_warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) g_only = argv[++i];
        else if (!strcmp(argv[i], "--torch") && i + 1 < argc) g_torch = argv[++i];
        else if (!strcmp(argv[i], "--back-to-back")) g_batch = B2B_CALLS;
        else if (!strcmp(argv[i], "--splits") && i + 1 < argc && strcmp(argv[i + 1], "all")) {
            int on[SPLITS_COUNT_];
            if (!bench_splits_parse(argv[++i], on)) return 2;
            for (int j = 0; j < SPLITS_COUNT_; j++)
                if (on[j]) g_splits = (bench_splits_t)j;
        }
        else if (!strcmp(argv[i], "--gated")) g_batch = B2B_CALLS, g_gated = 1;
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc && nshapes < 8 &&
                 sscanf(argv[i + 1], "%lldx%lld", &shapes[nshapes][0], &shapes[nshapes][1]) == 2 &&
                 shapes[nshapes][0] > 0 && shapes[nshapes][1] > 0)
            nshapes++, i++;
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            dt = !strcmp(d, "fp32") ? GLN_DTYPE_FP32 : !strcmp(d, "fp16") ? GLN_DTYPE_FP16 : GLN_DTYPE_BF16;
        } else {
            fprintf(stderr,
                    "usage: gpu_quantize [--repeat N] [--warmup N] [--dtype bf16|fp16|fp32] [--only SUBSTRING]"
                    " [--torch CMD] [--shape ROWSxCOLS]... [--back-to-back | --gated]"
                    " [--splits uniform|zipf|empty|router|random]\n");
            return 2;
        }
    }
    if (g_repeat < 1) g_repeat = 1;
    gln_context_t *ctx = bench_cuda_context();
    const double copy = copy_gbps(ctx, (size_t)512 << 20);
    printf("device-to-device copy: %.0f GB/s (read + written); input %s; median of %d after %d warm-up; %s\n", copy,
           gln_dtype_name(dt), g_repeat, g_warmup,
           g_gated     ? "gated: a sample is 10 calls released to the device together"
           : g_batch > 1 ? "back-to-back: a sample is 10 calls enqueued together"
                         : "a sample is one call on an idle device");
    { /* what the environment changes in the CUDA backend's quantize launches */
        const char *grid = getenv("GLN_CUDA_QUANT_GRID"), *pdl = getenv("GLN_CUDA_PDL");
        printf("quantize grids %s (GLN_CUDA_QUANT_GRID=%s), programmatic dependent launch %s (GLN_CUDA_PDL=%s)\n",
               grid ? "capped" : "as resident", grid ? grid : "unset", pdl && pdl[0] == '0' ? "off" : "on",
               pdl ? pdl : "unset");
    }
    for (int k = 0; k < K_COUNT; k++) run(ctx, "16384x8192", (kind_t)k, dt, 0, 16384, 8192, 0, SPLITS_UNIFORM, copy);
    for (int i = 0; i < nshapes; i++) {
        char label[64];
        snprintf(label, sizeof label, "%lldx%lld", shapes[i][0], shapes[i][1]);
        for (int k = 0; k < K_COUNT; k++) run(ctx, label, (kind_t)k, dt, 0, shapes[i][0], shapes[i][1], 0, SPLITS_UNIFORM, copy);
    }
    for (size_t m = 0; m < sizeof moes / sizeof moes[0]; m++) {
        const moe_t *s = &moes[m];
        char label[64];
        const int64_t M = s->experts * s->tokens;
        for (int k = 0; k < K_COUNT; k++) {
            snprintf(label, sizeof label, "%s x", s->name);
            run(ctx, label, (kind_t)k, dt, s->experts, M, s->k, 1, g_splits, copy);
            snprintf(label, sizeof label, "%s dy", s->name);
            run(ctx, label, (kind_t)k, dt, s->experts, M, s->n, 1, g_splits, copy);
            snprintf(label, sizeof label, "%s weights", s->name);
            run(ctx, label, (kind_t)k, dt, s->experts, s->experts * s->n, s->k, 1, SPLITS_UNIFORM, copy);
        }
    }
    /* 128 expert weights in one grouped launch vs the same bytes as one tensor */
    printf("grouped launch vs one tensor (qwen3 weights, 128 x [768, 2048]):\n");
    for (int k = 0; k < K_COUNT; k++) {
        const double one = run(ctx, "qwen3-w one tensor", (kind_t)k, dt, 0, 128 * 768, 2048, 0, SPLITS_UNIFORM, copy);
        const double dev = run(ctx, "qwen3-w grouped", (kind_t)k, dt, 128, 128 * 768, 2048, 1, SPLITS_UNIFORM, copy);
        const double host = run(ctx, "qwen3-w grouped", (kind_t)k, dt, 128, 128 * 768, 2048, 0, SPLITS_UNIFORM, copy);
        if (one > 0.0)
            printf("  %-18s grouped / one tensor: device splits %.3f, host splits %.3f\n", kind_names[k], dev / one,
                   host / one);
    }
    gln_context_destroy(ctx);
    if (g_torch && dt == GLN_DTYPE_BF16) torch_compare(); /* after ours: the GPU is torch's alone */
    return 0;
}

/* Per-tensor (TENSOR: current and delayed scaling) and MXFP8 quantization of a group of members
 * — a grouped tensor, or a single tensor as a group of one — in a fixed number of launches
 * whatever the member count, reading the member layout from the group plan on the device: no
 * host synchronization, no allocation but stream-ordered scratch, so a call captures in a CUDA
 * graph.  This file is the way in (gln_cuda_quantize_members*): the scratch, the kernel
 * arguments, the setup kernel, the choice of kernel, the fused dbias's finalize.
 *
 * A setup kernel computes a deferred plan (gln_cuda_plan_defer), turns the plan's row offsets
 * into each member's first row tile (tile_start) and zeroes the amax partials (the same kernel
 * alone compares device-resident out->splits with in->splits: gln_cuda_check_out_splits).  Then
 * one job, each with a fast kernel and a general one for what the fast one cannot take:
 *   TENSOR   cuda_quant_tensor.cu: tq_tma_kernel (bf16 / fp16 through a bulk-copy pipeline),
 *            else tq_general_kernel;
 *   MXFP8    cuda_quant_mxfp8.cu: mxq_tma_kernel, else mxq_general_kernel.
 * gln_cuda_quant_last_kernel names the kernel a call ran on (the tests prove the choice).
 *   dbias (gln_cuda_quantize_members_dbias, grouped dy): the pass that reads x for the amax
 *            (current: the amax pass; delayed: the cast pass; MXFP8: its one pass) also writes
 *            each tile's column sums in the order of quant/dbias_tiled.h to scratch; a finalize
 *            kernel sums a member's tiles in order (+ the old value) and rounds once.  cfg NULL:
 *            the amax pass runs for the sums alone. */
#include "backend/cuda/cuda_quant_tile.cuh"

/* ---- setup: tile starts, amax partials, the out->splits check ---------------------------- */

/* Exclusive prefix sum over the block (GQ_THREADS threads); *total = the sum of all. */
__device__ int64_t gq_block_scan(int64_t v, int64_t *total) {
    __shared__ int64_t warp_sum[GQ_THREADS / 32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    int64_t inc = v;
    for (int off = 1; off < 32; off <<= 1) {
        const int64_t n = __shfl_up_sync(GQ_FULL, inc, off);
        if (lane >= off) inc += n;
    }
    if (lane == 31) warp_sum[wid] = inc;
    __syncthreads();
    int64_t base = 0, all = 0;
    for (int w = 0; w < GQ_THREADS / 32; w++) {
        if (w < wid) base += warp_sum[w];
        all += warp_sum[w];
    }
    *total = all;
    return base + inc - v;
}

/* A deferred plan first (plan.splits: gln_cuda_plan_defer's job, its rows are `rows`); then
 * tstart[i] = row tiles of the members before i (tstart[num] = all); work[0..nwork) = 0 and
 * *done = 0 (tq_finish_scale's counter, where given); the
 * first member whose device-resident out split differs from in's goes to the async error word
 * (the kernels follow in's splits). */
static_assert(GQ_THREADS == GLN_PLAN_THREADS, "the setup block computes a deferred plan");
__global__ void __launch_bounds__(GQ_THREADS)
    gq_setup_kernel(gln_cuda_plan_job_t plan, const int64_t *rows, int32_t num, int64_t *tstart, gq_amax_t *work,
                    int32_t nwork, unsigned int *done, const int64_t *in_splits, const int64_t *out_splits,
                    gln_cuda_async_error_t *err) {
    __shared__ int32_t first_bad;
    gln_pdl_wait(); /* launched by gln_cuda_launch: the previous kernels' writes first */
    gln_pdl_launch_dependents();
    if (plan.splits) {
        gln_plan_compute(plan);
        __syncthreads(); /* its rows, written by the block, before the tile starts read them */
    }
    const int t = threadIdx.x;
    for (int32_t i = t; i < nwork; i += GQ_THREADS) work[i].nan_not = 0, work[i].max_bits = 0, work[i].pad_ = 0;
    if (done && t == 0) *done = 0;
    if (out_splits) {
        if (t == 0) first_bad = INT_MAX;
        __syncthreads();
        for (int32_t i = t; i < num; i += GQ_THREADS)
            if (out_splits[i] != in_splits[i]) atomicMin(&first_bad, i);
        __syncthreads();
        if (t == 0 && first_bad != INT_MAX && err) {
            if (atomicCAS(&err->kind, GLN_CUDA_ASYNC_NONE, GLN_CUDA_ASYNC_SPLITS_MISMATCH) == GLN_CUDA_ASYNC_NONE)
                err->member = first_bad, err->value = (long long)out_splits[first_bad];
            __threadfence_system(); /* the error word is mapped host memory */
        }
    }
    if (!tstart) return;
    const int32_t per = (num + GQ_THREADS - 1) / GQ_THREADS, i0 = t * per;
    const int32_t i1 = i0 + per < num ? i0 + per : num;
    int64_t mine = 0, total = 0;
    for (int32_t i = i0; i < i1; i++) mine += (rows[i + 1] - rows[i] + GQ_TR - 1) / GQ_TR;
    int64_t run = gq_block_scan(mine, &total);
    for (int32_t i = i0; i < i1; i++) {
        tstart[i] = run;
        run += (rows[i + 1] - rows[i] + GQ_TR - 1) / GQ_TR;
    }
    if (t == 0) tstart[num] = total;
}

/* Member first + blockIdx.y, column j: s = Σ p_t over its row tiles in order (+ old), rounded once. */
__global__ void gq_dbias_finalize_kernel(const float *part, const int64_t *tstart, int64_t cols, int32_t first,
                                         gln_dbias_outputs_t out, int accumulate) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int32_t i = (int32_t)blockIdx.y;
    if (j >= cols) return;
    const int64_t t0 = tstart[first + i], t1 = tstart[first + i + 1];
    if (t0 == t1 && accumulate) return; /* empty member: nothing to add */
    float acc = 0.0f;
    for (int64_t t = t0; t < t1; t++) acc = gln_dev_add(acc, part[(size_t)t * (size_t)cols + (size_t)j]);
    if (accumulate) acc = gln_dev_add(acc, gln_dev_load(out.data[i], out.dtype[i], (size_t)j));
    gln_dev_store(out.data[i], out.dtype[i], (size_t)j, acc);
}

/* ---- host side ---------------------------------------------------------------------------- */

int64_t gq_grid_cap(void) { return gln_cuda_env_grid_cap("GLN_CUDA_QUANT_GRID"); }

gln_status_t gq_grid(const void *kernel, int64_t tiles, int64_t *blocks, const char *call, size_t smem,
                     int one_per_sm) {
    return gln_cuda_persistent_grid(kernel, GQ_THREADS, smem, one_per_sm, tiles, gq_grid_cap(), call, blocks);
}

gln_status_t gq_launch_on(gq_kernel_t kernel, const gq_args_t *a, int64_t tiles, int64_t blocks, cudaStream_t stream,
                          const char *call, const char *name) {
    if (tiles <= 0 || blocks <= 0) return GLN_STATUS_SUCCESS;
    kernel<<<(unsigned int)blocks, GQ_THREADS, 0, stream>>>(*a);
    return gln_cuda_check_launch(call, name);
}

gln_status_t gq_launch(gq_kernel_t kernel, const gq_args_t *a, int64_t tiles, cudaStream_t stream, const char *call,
                       const char *name) {
    if (tiles <= 0) return GLN_STATUS_SUCCESS;
    int64_t blocks = 0;
    GLN_TRY(gq_grid((const void *)kernel, tiles, &blocks, call));
    return gq_launch_on(kernel, a, tiles, blocks, stream, call, name);
}

/* The kernel of this thread's last quantize pass (a per-thread name: calls on other threads and
 * contexts do not disturb a test's reading). */
static thread_local const char *gq_last_kernel = NULL;

void gq_probe(const char *kernel) { gq_last_kernel = kernel; }

extern "C" const char *gln_cuda_quant_last_kernel(void) { return gq_last_kernel; }

/* Scratch of one call: tile starts [num + 1], amax partials [num], scales [num] (current scaling
 * without out->scale).  A single tensor uses the context's fixed buffers instead (no allocation). */
typedef struct gq_scratch {
    void *block;
    int64_t *tstart;
    gq_amax_t *work;
    unsigned int *done; /* TENSOR: tq_finish_scale's arrival counter */
    float *scale;
} gq_scratch_t;

static gln_status_t gq_scratch_get(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *out,
                                   int32_t num, int grouped, gq_scratch_t *sc, const char *call) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const int tensor = cfg->mode == GLN_SCALING_TENSOR, own_scale = tensor && !cfg->delayed && !out->scale;
    memset(sc, 0, sizeof *sc);
    if (!grouped) {
        sc->work = (gq_amax_t *)s->amax_work; /* 16 bytes, the layout of gq_amax_t */
        sc->done = tensor ? (unsigned int *)((char *)s->amax_work + 128) : NULL; /* within its 256 bytes */
        sc->scale = own_scale ? s->scale_tmp : out->scale;
        return GLN_STATUS_SUCCESS;
    }
    const size_t n = (size_t)num, b_ts = (n + 1) * sizeof(int64_t), b_work = tensor ? n * sizeof(gq_amax_t) : 0;
    const size_t b_done = tensor ? 16 : 0, b_scale = own_scale ? n * sizeof(float) : 0;
    GLN_TRY(gln_cuda_scratch_alloc(ctx, b_ts + b_work + b_done + b_scale, &sc->block, call));
    sc->tstart = (int64_t *)sc->block;
    sc->work = tensor ? (gq_amax_t *)((char *)sc->block + b_ts) : NULL;
    sc->done = tensor ? (unsigned int *)((char *)sc->block + b_ts + b_work) : NULL;
    sc->scale = own_scale ? (float *)((char *)sc->block + b_ts + b_work + b_done) : out->scale;
    return GLN_STATUS_SUCCESS;
}

/* The tile order (gq_walk): round-robin across blocks (strided) for MXFP8 and delayed scaling,
 * so that the blocks resident together read neighbouring tiles as a copy does; a band of
 * consecutive tiles per block for current scaling, whose cast pass walks its band backwards and
 * so starts on the tiles its amax pass read last, still in L2 (bench/RESULTS.md has the
 * measurements that chose each order).  The order changes no byte. */
static int gq_strided(const gln_quant_config_t *cfg) {
    return cfg->mode == GLN_SCALING_MXFP8_1D || (cfg->mode == GLN_SCALING_TENSOR && cfg->delayed);
}

static gq_args_t gq_args_make(const gln_quant_config_t *cfg, const gln_tensor_t *in, const gln_tensor_t *out,
                              int32_t num, const gln_cuda_plan_t *plan, const gq_scratch_t *sc) {
    gq_args_t a;
    memset(&a, 0, sizeof a);
    a.strided = gq_strided(cfg);
    const int tensor = cfg->mode == GLN_SCALING_TENSOR;
    a.x = in->data;
    a.q = cfg->rowwise ? (uint8_t *)out->data : NULL;
    a.qc = cfg->columnwise ? (uint8_t *)out->col_data : NULL;
    if (!tensor) {
        a.s = cfg->rowwise ? (uint8_t *)out->scale_inv : NULL;
        a.cs = cfg->columnwise ? (uint8_t *)out->col_scale_inv : NULL;
    }
    a.scale = sc->scale;
    a.work = sc->work;
    if (plan) a.rows = plan->rows, a.tstart = sc->tstart, a.srow = plan->srow, a.scol = plan->scol;
    a.single_rows = in->rows;
    a.cols = in->cols;
    a.n_ct = gln_ceil_div(in->cols, GQ_TC);
    a.nb = gln_ceil_div(in->cols, 32);
    a.gc_r = gln_round_up(a.nb, 4);
    a.gc_c = gln_round_up(in->cols, 128);
    a.num = num;
    a.e5m2 = cfg->fp8_dtype == GLN_DTYPE_FP8_E5M2;
    a.nanp = cfg->amax_nan_propagate;
    a.floor_rule = cfg->e8m0_rounding == GLN_E8M0_ROUND_FLOOR;
    a.emax = a.e5m2 ? 15 : 8; /* the OCP rule's emax_elem: exponent of the largest power of two <= max */
    a.fp8_max = a.e5m2 ? GLN_FP8_E5M2_MAX : GLN_FP8_E4M3_MAX;
    return a;
}

extern "C" gln_status_t gln_cuda_check_out_splits(gln_context_t *ctx, int32_t num, const int64_t *in_splits,
                                                  const int64_t *out_splits, const char *call) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    const gln_cuda_plan_job_t no_plan = {};
    GLN_TRY(gln_cuda_check(gln_cuda_launch(gq_setup_kernel, dim3(1), dim3(GQ_THREADS), 0, s->stream, no_plan,
                                           (const int64_t *)NULL, num, (int64_t *)NULL, (gq_amax_t *)NULL, 0,
                                           (unsigned int *)NULL, in_splits, out_splits, s->async_dev),
                           call, "gq_setup_kernel"));
    return gln_cuda_check_launch(call, "gq_setup_kernel");
}

/* The dbias finalize launches: members in chunks of GLN_DBIAS_CHUNK (their outputs by value). */
static gln_status_t gq_dbias_finalize(gln_context_t *ctx, const float *part, const int64_t *tstart, int64_t cols,
                                      int32_t num, gln_tensor_t *dbias, int accumulate, const char *call) {
    cudaStream_t st = gln_cuda_state(ctx)->stream;
    const unsigned int col_blocks = (unsigned int)gln_ceil_div(cols, GQ_THREADS);
    for (int32_t first = 0; first < num; first += GLN_DBIAS_CHUNK) {
        const int32_t n = num - first < GLN_DBIAS_CHUNK ? num - first : GLN_DBIAS_CHUNK;
        gq_dbias_finalize_kernel<<<dim3(col_blocks, (unsigned int)n), GQ_THREADS, 0, st>>>(
            part, tstart, cols, first, gln_dbias_outputs(dbias, first, n), accumulate);
        GLN_TRY(gln_cuda_check_launch(call, "gq_dbias_finalize_kernel"));
    }
    return GLN_STATUS_SUCCESS;
}

/* cfg NULL: the dbias alone (the general amax pass reading x once, its amaxes discarded).  act, ld:
 * gq_args_t's activation on load (GLN_ACT_LOAD_NONE: none). */
static gln_status_t gq_members(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                               gln_tensor_t *out, int32_t num, const gln_cuda_plan_t *plan, gln_tensor_t *dbias,
                               int accumulate, int swizzled, const gln_cuda_amax_record_t *rec, const char *call,
                               int act = GLN_ACT_LOAD_NONE, int64_t ld = 0) {
    gln_cuda_state_t *s = gln_cuda_state(ctx);
    gln_quant_config_t only_dbias = GLN_QUANT_CONFIG_INIT;
    if (!cfg) {
        only_dbias.rowwise = 0, only_dbias.columnwise = 0;
        cfg = &only_dbias, out = (gln_tensor_t *)in; /* no output is written */
    }
    const int tensor = cfg->mode == GLN_SCALING_TENSOR, quantize = cfg->rowwise || cfg->columnwise;
    if (!tensor && cfg->mode != GLN_SCALING_MXFP8_1D)
        return gln_fail(GLN_STATUS_INTERNAL_ERROR, "%s: gln_cuda_quantize_members takes TENSOR or MXFP8_1D, not %s",
                        call, gln_scaling_name(cfg->mode));
    if (dbias && !plan) return gln_fail(GLN_STATUS_INTERNAL_ERROR, "%s: a fused dbias needs the group plan", call);
    if (in->cols == 0) dbias = NULL; /* every dbias is empty */
    gq_scratch_t sc;
    GLN_TRY(gq_scratch_get(ctx, cfg, out, num, plan != NULL, &sc, call));
    gq_args_t a = gq_args_make(cfg, in, out, num, plan, &sc);
    a.swz = swizzled && cfg->mode == GLN_SCALING_MXFP8_1D;
    a.act = act, a.ld = ld;
    /* tiles: a bound from what the host knows (each member adds at most one partial row tile) */
    const int64_t row_tiles = gln_ceil_div(in->rows, GQ_TR) + (plan ? num : 0), tiles = row_tiles * a.n_ct;
    void *part = NULL;
    gln_status_t st = GLN_STATUS_SUCCESS;
    if (dbias && row_tiles > 0)
        st = gln_cuda_scratch_alloc(ctx, (size_t)row_tiles * (size_t)in->cols * sizeof(float), &part, call);
    a.dpart = (float *)part;
    if (st == GLN_STATUS_SUCCESS && (plan || tensor)) {
        const gln_cuda_plan_job_t job = plan ? plan->pending : gln_cuda_plan_job_t{}; /* a deferred plan */
        st = gln_cuda_check(gln_cuda_launch(gq_setup_kernel, dim3(1), dim3(GQ_THREADS), 0, s->stream, job, a.rows,
                                            num, sc.tstart, sc.work, tensor ? num : (int32_t)0, sc.done,
                                            (const int64_t *)NULL, (const int64_t *)NULL, s->async_dev),
                            call, "gq_setup_kernel");
        if (st == GLN_STATUS_SUCCESS) st = gln_cuda_check_launch(call, "gq_setup_kernel");
    }
    if (st == GLN_STATUS_SUCCESS) {
        if (!quantize) { /* the dbias alone */
            if (a.dpart) st = tq_run_dbias(&a, in, tiles, s->stream, call);
        } else if (tensor) {
            st = tq_run(ctx, cfg, &a, in, out, tiles, sc.done, rec, call);
        } else {
            st = mxq_run(&a, in, row_tiles, tiles, s->stream, call);
        }
    }
    if (st == GLN_STATUS_SUCCESS && dbias)
        st = gq_dbias_finalize(ctx, a.dpart, sc.tstart, in->cols, num, dbias, accumulate, call);
    if (part) gln_cuda_scratch_free(ctx, part);
    if (sc.block) gln_cuda_scratch_free(ctx, sc.block);
    return st;
}

extern "C" gln_status_t gln_cuda_quantize_members(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                  const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                                  const gln_cuda_plan_t *plan, const char *call) {
    return gq_members(ctx, cfg, in, out, num, plan, NULL, 0, 0, NULL, call);
}

extern "C" gln_status_t gln_cuda_quantize_members_swizzled(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                           const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                                           const gln_cuda_plan_t *plan, const char *call) {
    return gq_members(ctx, cfg, in, out, num, plan, NULL, 0, 1, NULL, call);
}

extern "C" gln_status_t gln_cuda_quantize_members_dbias(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                        const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                                        const gln_cuda_plan_t *plan, gln_tensor_t *dbias,
                                                        int accumulate, const char *call) {
    return gq_members(ctx, cfg, in, out, num, plan, dbias, accumulate, 0, NULL, call);
}

extern "C" gln_status_t gln_cuda_quantize_members_record(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                         const gln_tensor_t *in, gln_tensor_t *out, int32_t num,
                                                         const gln_cuda_plan_t *plan, gln_tensor_t *dbias,
                                                         int accumulate, const gln_cuda_amax_record_t *rec,
                                                         const char *call) {
    return gq_members(ctx, cfg, in, out, num, plan, dbias, accumulate, 0, rec, call);
}

/* Activation on load (gln_activation_forward_quantize): `in` describes the activation's bf16
 * output [rows, H] but its data is the activation's input, ld elements per row (cuda_backend.h). */
extern "C" gln_status_t gln_cuda_quantize_members_act(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                                      gln_activation_t act, int64_t ld, const gln_tensor_t *in,
                                                      gln_tensor_t *out, int32_t num, const gln_cuda_plan_t *plan,
                                                      const char *call) {
    return gq_members(ctx, cfg, in, out, num, plan, NULL, 0, 0, NULL, call, gln_act_load_kind((int)act), ld);
}

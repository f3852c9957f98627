/* The grouped linear layer: internal state shared by the files of src/layer.
 *
 * File map (one concept per file):
 *   layer.c         create / destroy / weights_updated / fp8_state (public lifecycle calls)
 *   layer_config.c  validation of gln_grouped_linear_config_t at create (every invalid value or combination)
 *   layer_params.c  owned vs caller parameters, gradient buffers, weight/grads/zero_grad
 *   recipe.c        quantizer configuration per role (input, weight, grad_output)
 *   fp8_state.c     delayed-scaling state (scale, amax history) in backend memory
 *   buffers.c       layer-owned grouped buffers (activations) and weight sets, member views
 *   cache.c         the quantized-weight cache (reference-counted entries)
 *   materialize.c   THE weight materialization stage (plain, cached or distributed weights)
 *   act_quant.c     quantization of grouped activations / gradients on either path
 *   gemm_stage.c    fprop / dgrad / wgrad GEMMs on the split and grouped paths
 *   validate.c      boundary checks of forward / backward arguments
 *   forward.c       gln_grouped_linear_forward and the saved context
 *   backward.c      gln_grouped_linear_backward, saved_release
 *   wgrad_queue.c   FIFO of delayed wgrad work, gln_grouped_linear_backward_dw
 *   layer_error.c   failures inside a call reported under the public call, its step, the hook
 */
#ifndef GLN_LAYER_LAYER_H
#define GLN_LAYER_LAYER_H

#include "backend/context.h"
#include "backend/ops.h"
#include "common/error.h"
#include "grouplin.h"

/* ---------------------------------------------------------------- recipe.c */

/* Quantizer configuration per tensor role; rowwise / columnwise are filled in per call. */
typedef struct gln_layer_recipe {
    int quantized;                 /* recipe != NONE */
    int delayed;                   /* FP8_DELAYED: per-tensor scales from the amax history */
    gln_quant_config_t input;      /* x */
    gln_quant_config_t weight;     /* W */
    gln_quant_config_t grad;       /* dy */
} gln_layer_recipe_t;

/* cfg->fp8_format must be resolved (not RECIPE_DEFAULT). */
void gln_layer_recipe_init(const gln_grouped_linear_config_t *cfg, gln_layer_recipe_t *r);
/* GLN_FP8_FORMAT_RECIPE_DEFAULT → TE's default for the recipe; other formats unchanged. */
gln_fp8_format_t gln_layer_fp8_format_resolve(gln_recipe_t recipe, gln_fp8_format_t format);

/* ---------------------------------------------------------------- fp8_state.c */

/* Delayed scaling state, backend memory: scale[slots], amax_history[L][slots], fp8_max[slots];
 * opts = the layer's always_roll / amax_nan_propagate, used by record and update.  host_scale /
 * host_history: host copies for gln_grouped_linear_fp8_state on a backend whose memory is not
 * host memory (allocated on first use). */
typedef struct gln_fp8_state {
    int32_t slots, history_len;
    float *scale, *amax_history, *fp8_max;
    float *host_scale, *host_history;
    gln_delayed_update_options_t opts;
} gln_fp8_state_t;

gln_status_t gln_fp8_state_init(gln_context_t *ctx, gln_fp8_state_t *st, int32_t slots, int32_t history_len,
                                float fp8_max, const gln_grouped_linear_config_t *cfg);
void gln_fp8_state_free(gln_context_t *ctx, gln_fp8_state_t *st);
/* Copy scale[first + i*stride] (i < n) into the backend array `scale` and zero the backend
 * array `amax` (amax NULL: the scales only). */
gln_status_t gln_fp8_state_stage(gln_context_t *ctx, const gln_fp8_state_t *st, int32_t first,
                                 int32_t stride, int32_t n, float *scale, float *amax);
/* Max-accumulate the backend array amax[n] into history row 0 of slots first + i*stride. */
gln_status_t gln_fp8_state_record(gln_context_t *ctx, gln_fp8_state_t *st, int32_t first,
                                  int32_t stride, int32_t n, const float *amax);
/* One delayed-scaling update step of every slot (gln_delayed_scaling_update_ex's rule). */
gln_status_t gln_fp8_state_update(gln_context_t *ctx, gln_fp8_state_t *st, int margin, gln_amax_algo_t algo);
/* Copy the backend array scales[n] into the backend array `scale` and zero `amax` (replaying
 * scales recorded earlier instead of the state's current ones). */
gln_status_t gln_fp8_stage_values(gln_context_t *ctx, const float *scales, int32_t n, float *scale,
                                  float *amax);
/* Host-readable scale / history for public call `fn`: on the CPU backend the state itself; else
 * the host mirrors, refreshed from the backend by this call (a synchronizing copy). */
gln_status_t gln_fp8_state_host(const char *fn, gln_context_t *ctx, gln_fp8_state_t *st, float **scale,
                                float **amax_history);

/* ---------------------------------------------------------------- buffers.c */

/* A grouped tensor whose storage the layer owns: rowwise part (data + scale_inv), columnwise
 * part (col_data + col_scale_inv) and per-tensor aux (scale[N], amax[N]) in three allocations,
 * so the rowwise part can be dropped when only the columnwise copy is saved.  `offs` holds,
 * when the splits are known on the host, the first row of each member and each member's scale
 * offsets (3 arrays of N+1). */
typedef struct gln_group_buffer {
    gln_grouped_tensor_t g;
    void *mem_row, *mem_col, *mem_aux;
    int64_t *offs; /* host: row_start[N+1], srow[N+1], scol[N+1]; NULL without host splits */
} gln_group_buffer_t;

/* High-precision [rows, cols] grouped buffer (dtype fp32/bf16/fp16). */
gln_status_t gln_group_buffer_alloc_high_precision(gln_context_t *ctx, gln_dtype_t dtype, int64_t rows,
                                                   int64_t cols, int32_t num, const int64_t *splits,
                                                   int splits_on_backend, gln_group_buffer_t *b);
/* Quantized grouped buffer for cfg (mode, fp8 dtype, rowwise / columnwise). */
gln_status_t gln_group_buffer_alloc_quantized(gln_context_t *ctx, const gln_quant_config_t *cfg, int64_t rows,
                                              int64_t cols, int32_t num, const int64_t *splits,
                                              int splits_on_backend, gln_group_buffer_t *b);
void gln_group_buffer_free(gln_context_t *ctx, gln_group_buffer_t *b);
/* Free the rowwise half of a quantized buffer (keeps the columnwise copy). */
void gln_group_buffer_drop_rowwise(gln_context_t *ctx, gln_group_buffer_t *b);
/* Describe caller memory (x, y, dy, dx) as an unowned grouped buffer (no storage freed). */
gln_status_t gln_group_buffer_wrap(const gln_tensor_t *t, int32_t num, const int64_t *splits,
                                   int splits_on_backend, gln_group_buffer_t *b);

/* A zeroed buffer for a library-allocated output of t's shape and dtype (y, dx). */
gln_status_t gln_output_alloc(gln_context_t *ctx, const gln_tensor_t *t, void **buf);

/* N weights [rows, cols] (one allocation), high precision or quantized. */
typedef struct gln_weight_set {
    int32_t num;
    gln_tensor_t *t;     /* host array [N] */
    void *mem;           /* NULL when the tensors view caller memory */
    float *aux;          /* per-tensor modes: scale[N] then amax[N] (backend memory) */
    gln_tensor_t packed; /* quantized sets: the N weights as one grouped tensor [N·rows, cols]
                          * (members of `rows` rows; gln_weight_set_alloc_quantized); else
                          * data and col_data NULL */
} gln_weight_set_t;

gln_status_t gln_weight_set_alloc_high_precision(gln_context_t *ctx, gln_dtype_t dtype, int32_t num,
                                                 int64_t rows, int64_t cols, gln_weight_set_t *w);
gln_status_t gln_weight_set_alloc_quantized(gln_context_t *ctx, const gln_quant_config_t *cfg, int32_t num,
                                            int64_t rows, int64_t cols, gln_weight_set_t *w);
/* Views of caller buffers (no storage). */
gln_status_t gln_weight_set_wrap(int32_t num, gln_dtype_t dtype, int64_t rows, int64_t cols,
                                 void *const *ptrs, gln_weight_set_t *w);
void gln_weight_set_free(gln_context_t *ctx, gln_weight_set_t *w);

/* ---------------------------------------------------------------- cache.c */

/* One cached set of quantized weights.  The layer holds one reference; every saved context
 * whose dgrad uses it holds another, so a later re-quantization never changes the weights an
 * in-flight backward will use (re-quantizing in place happens only when the layer's reference
 * is the only one; otherwise a fresh entry replaces it). */
typedef struct gln_weight_cache_entry {
    int refs;
    uint64_t version;
    int rowwise, columnwise;
    gln_weight_set_t w;
} gln_weight_cache_entry_t;

void gln_weight_cache_unref(gln_context_t *ctx, gln_weight_cache_entry_t *e);
/* A new reference to cached weights holding at least the requested copies (policy in cache.c). */
gln_status_t gln_weight_cache_get(gln_grouped_linear_t *L, gln_microbatch_t mb, int need_row, int need_col,
                                  gln_weight_cache_entry_t **out);

/* ---------------------------------------------------------------- the layer */

typedef struct gln_wgrad_item gln_wgrad_item_t;

struct gln_grouped_linear {
    gln_context_t *ctx;
    gln_grouped_linear_config_t cfg;  /* copy (params pointers are the caller's) */
    int32_t n;
    int64_t kin, kout;
    const gln_dist_weights_t *dist;   /* NULL: plain weights */
    int dist_pending;                 /* the last finalize_grads reported pending: the next
                                         backward calls dist->wait() before touching the group */

    /* parameters (plain weights): N pointers each */
    void **weights;                   /* param dtype [K_out, K_in] */
    void **biases;                    /* param dtype [K_out]; NULL without bias */
    float **main_grads;               /* FP32 (fused wgrad) or NULL */
    void **wgrads;                    /* param dtype (not fused, not distributed) or NULL */
    void **bgrads;                    /* param dtype [K_out] or NULL */
    void *owned_weights, *owned_biases, *owned_main_grad, *owned_wgrad, *owned_bgrad;

    gln_layer_recipe_t recipe;
    gln_fp8_state_t fp8_fwd, fp8_bwd;  /* FP8_DELAYED only */

    uint64_t weight_version;          /* bumped by weights_updated */
    gln_weight_cache_entry_t *cache;  /* quantized plain weights (FP8 recipes) */

    gln_wgrad_item_t *queue_head, *queue_tail; /* delayed wgrad FIFO */
    int live_saved;                   /* saved contexts not yet released */
    void *owned_y;                    /* y allocated for an inference forward */
};

/* layer_config.c */
gln_status_t gln_layer_config_validate(const gln_context_t *ctx, const gln_grouped_linear_config_t *cfg);
/* Copy a possibly older / shorter config over the defaults (a refused size names fn). */
gln_status_t gln_layer_config_load(const char *fn, const gln_grouped_linear_config_t *in,
                                   gln_grouped_linear_config_t *out);

/* layer_params.c */
gln_status_t gln_layer_params_init(gln_grouped_linear_t *L);
void gln_layer_params_free(gln_grouped_linear_t *L);

/* ---------------------------------------------------------------- materialize.c */

typedef enum gln_materialize_stage {
    GLN_MATERIALIZE_STAGE_FORWARD = 0,
    GLN_MATERIALIZE_STAGE_BACKWARD = 1
} gln_materialize_stage_t;

/* Weights ready for one GEMM stage.  Exactly one of entry / temp / plain views holds them. */
typedef struct gln_materialized_weights {
    const gln_tensor_t *w;            /* [N] GEMM operands */
    gln_weight_cache_entry_t *entry;  /* cached quantized weights (a reference) */
    gln_weight_set_t temp;            /* owned cast / quantized copy, or views */
    gln_tensor_t *gathered;           /* distributed: materialized tensors [N] to release */
} gln_materialized_weights_t;

/* Produce the weights for a stage: fprop needs rowwise (and, when `need_col`, the columnwise
 * copy is made too for a later dgrad); dgrad (BACKWARD) needs columnwise.  replay_scales
 * (delayed scaling, distributed weights in backward; backend memory): quantize with these N
 * weight scales — the ones the forward used — and record no amax, so dgrad sees the same
 * quantized weights as with plain weights; NULL: the state's current scales, amax recorded. */
gln_status_t gln_materialize(gln_grouped_linear_t *L, gln_materialize_stage_t stage, gln_microbatch_t mb,
                             int need_row, int need_col, const float *replay_scales,
                             gln_materialized_weights_t *mw);
/* Quantize N high-precision weights into dst (copies per cfg).  Delayed scaling uses the weight
 * slots 3i+1 and records their amax. */
gln_status_t gln_weights_quantize(gln_grouped_linear_t *L, const gln_tensor_t *src,
                                  const gln_quant_config_t *cfg, const float *replay_scales,
                                  gln_weight_set_t *dst);
/* Hand distributed copies back, free temporaries, drop cache references. */
gln_status_t gln_materialize_release(gln_grouped_linear_t *L, gln_materialized_weights_t *mw);
/* Distributed weights on a sharded group: the agreement every forward / backward runs once its
 * arguments are validated (call, recipe, fp8 format, dgrad, wgrad), planning `hooks` more
 * collective hooks in this call (docs/distributed.md).  A no-op for plain weights and for
 * caller-written groups. */
gln_status_t gln_dist_agree_call(gln_grouped_linear_t *L, const char *fn, int call, int dgrad,
                                 int wgrad, int hooks);

/* ---------------------------------------------------------------- act_quant.c */

typedef enum gln_role { GLN_ROLE_INPUT = 0, GLN_ROLE_GRAD = 1 } gln_role_t;
/* Quantize the grouped activation `src` (host or device splits) into a
 * new buffer with the requested copies; delayed scaling stages / records the role's slots. */
gln_status_t gln_act_quantize(gln_grouped_linear_t *L, gln_role_t role, const gln_group_buffer_t *src,
                              int rowwise, int columnwise, gln_group_buffer_t *out);
/* The same for dy with the bias gradients dbias[i] (+)= the column sums of member i from the same
 * read, in the tiled order of quant/dbias_tiled.h on both paths. */
gln_status_t gln_act_quantize_dbias(gln_grouped_linear_t *L, const gln_group_buffer_t *dy, int rowwise,
                                    int columnwise, gln_group_buffer_t *out, gln_tensor_t *dbias, int accumulate);

/* ---------------------------------------------------------------- gemm_stage.c */

gln_status_t gln_stage_fprop(gln_grouped_linear_t *L, const gln_tensor_t *w, const gln_group_buffer_t *x,
                             const gln_tensor_t *bias, gln_group_buffer_t *y);
gln_status_t gln_stage_dgrad(gln_grouped_linear_t *L, const gln_tensor_t *w, const gln_group_buffer_t *dy,
                             gln_group_buffer_t *dx);
/* dW_i = dy_iᵀ x_i into d[i] (accumulate or overwrite); empty experts give 0 / unchanged. */
gln_status_t gln_stage_wgrad(const gln_grouped_linear_t *L, const gln_group_buffer_t *x, const gln_group_buffer_t *dy,
                             gln_tensor_t *d, int accumulate);

/* ---------------------------------------------------------------- saved context */

struct gln_grouped_linear_saved {
    gln_grouped_linear_t *layer;
    int done;                      /* backward ran (a second one is an error) */
    gln_microbatch_t microbatch;
    int need_dgrad, need_wgrad;
    int64_t rows;
    int splits_on_backend;
    int64_t *splits_host;          /* host copy [N] (split path or host splits) */
    int64_t *splits_dev;           /* backend copy [N] (grouped path with backend splits) */
    gln_group_buffer_t x;          /* wgrad operand: quantized columnwise or high-precision copy */
    int x_is_high_precision;       /* x holds the high-precision input */
    gln_materialized_weights_t mw; /* plain weights kept for dgrad */
    float *wscales;                /* delayed + distributed: the forward's weight scales [N]
                                      (backend memory) */
    int have_mw;
    void *owned_y, *owned_dx;
};

const int64_t *gln_saved_splits(const gln_grouped_linear_saved_t *s);
/* Free everything a saved context owns, and the context (NULL is a no-op). */
void gln_saved_free(gln_grouped_linear_saved_t *s);

/* ---------------------------------------------------------------- validate.c */

/* need_wgrad: the call saves a context whose backward runs a wgrad (an x_quantized input must
 * then carry its columnwise copy). */
gln_status_t gln_validate_forward(const gln_grouped_linear_t *L,
                                  const gln_grouped_linear_forward_args_t *args, int need_wgrad);
/* prequant.c: args->x_quantized is what the layer's input quantization would produce (recipe,
 * mode, FP8 format, copies, shape, experts, splits). */
gln_status_t gln_validate_x_quantized(const gln_grouped_linear_t *L, const gln_grouped_linear_forward_args_t *a,
                                      int need_col);
gln_status_t gln_validate_backward(const gln_grouped_linear_saved_t *s, const gln_tensor_t *dy,
                                   const gln_tensor_t *dx);
/* Σ splits (host-readable splits only) and the check against `rows` for the layer's path; each
 * split within the backend's GEMM dimension limit. */
gln_status_t gln_validate_splits(const char *fn, const gln_context_t *ctx, const char *what, gln_path_t path,
                                 int32_t n, const int64_t *splits, int64_t rows);

/* ---------------------------------------------------------------- wgrad_queue.c */

struct gln_wgrad_item {
    gln_wgrad_item_t *next;
    gln_group_buffer_t x, dy;      /* wgrad operands (owned) */
    int64_t *splits_host, *splits_dev;
    gln_tensor_t *d;               /* [N] outputs (views of layer / caller gradient buffers) */
    int accumulate;
};

void gln_wgrad_queue_push(gln_grouped_linear_t *L, gln_wgrad_item_t *item);
void gln_wgrad_item_free(gln_context_t *ctx, gln_wgrad_item_t *item);
void gln_wgrad_queue_clear(gln_grouped_linear_t *L);

/* ---------------------------------------------------------------- layer_error.c */

#define GLN_LAYER_MESSAGE_MAX 1024
/* A failure of step `step` (e.g. "quantizing args->x") inside public call `fn`: the detail the
 * internal call recorded is re-reported as "fn: step: detail" (fn's own prefix not repeated;
 * the status name when nothing was recorded).  Returns st. */
gln_status_t gln_layer_step_failed(const char *fn, const char *step, gln_status_t st);
/* Run a step of a layer call: store its status in `st`, on failure re-report it
 * (gln_layer_step_failed) and jump to `label`. */
#define GLN_STEP(st, label, fn, step, expr)                                                     \
    do {                                                                                        \
        (st) = (expr);                                                                          \
        if ((st) != GLN_STATUS_SUCCESS) {                                                       \
            (st) = gln_layer_step_failed((fn), (step), (st));                                   \
            goto label;                                                                         \
        }                                                                                       \
    } while (0)
/* Around a call of a distributed-weights hook: snapshot the last error before, then turn a
 * failure into "cfg->params.distributed-><hook>[ for expert E] failed (<status>): <the hook's
 * message, or that it left none>" — never an empty or stale message.  expert < 0: the hook
 * covers every expert.  Use GLN_DIST_HOOK. */
void gln_dist_hook_snapshot(char before[GLN_LAYER_MESSAGE_MAX]);
gln_status_t gln_dist_hook_result(const char *hook, int32_t expert, const char *before, gln_status_t st);
#define GLN_DIST_HOOK(st_out, hook, expert, call)                                               \
    do {                                                                                        \
        char before_[GLN_LAYER_MESSAGE_MAX];                                                    \
        gln_dist_hook_snapshot(before_);                                                        \
        gln_status_t hook_st_ = (call);                                                         \
        (st_out) = gln_dist_hook_result((hook), (expert), before_, hook_st_);                   \
    } while (0)

/* Small helpers. */
static inline size_t gln_align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
#define GLN_LAYER_ALIGN 256u

#endif

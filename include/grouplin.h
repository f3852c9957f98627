/*
 * grouplin — grouped linear layers for mixture-of-experts training in low precision.
 *
 * The one public header.  C11, no dependencies.  Every call returns a gln_status_t; on failure
 * gln_last_error() (per thread) names the call, the argument and the valid range.  The library
 * never aborts, never prints (unless a log callback is set) and never frees caller memory.
 *
 * Conventions
 *   - Row-major everywhere.  For expert i with m_i token rows:
 *       fprop  y_i  = x_i · W_iᵀ (+ b_i)   layout TN, reduction over K_in
 *       dgrad  dx_i = dy_i · W_i           layout NN, reduction over K_out
 *       wgrad  dW_i = dy_iᵀ · x_i          layout NT, reduction over m_i
 *   - Pointers inside tensors live in the memory of the context's backend (host memory for the
 *     CPU backend, device memory for CUDA).  Token splits may be in host or backend memory.
 *   - Option structs are versioned: always start from their _INIT macro.
 *
 * Threads (nothing in the library is locked unless said here)
 *   - Distinct contexts may be used from several threads at once, each with the objects made
 *     from it (layers, saved states, sharded weight groups, MoE calls).
 *   - One CPU context may be shared by threads at once when each uses its own layers and weight
 *     groups: the context's only mutable state, its cache of freed blocks, is locked.  A CUDA
 *     context is for one thread at a time: every call shares its scratch (FP8 scales, the amax
 *     and cuBLASLt workspaces) and enqueues on its one stream.
 *   - One layer (with its saved states), one sharded weight group, one communicator: one thread
 *     at a time.  A layer's quantized-weight cache, its inference output buffer, its
 *     delayed-scaling state and its delayed-wgrad queue are unsynchronized, so two threads in
 *     one layer race.  Never destroy an object while another thread uses it.
 *   - gln_last_error() is per thread.  gln_set_log_callback may be called at any time, from any
 *     thread (see there).
 *
 * Documentation (docs/ in the source tree): design.md — the library's layers, the backend table,
 * the layer's forward / backward stages, which inputs and buffers may be reused or freed after a
 * call returns, what a saved context holds, and how gradients accumulate; numerics.md — GEMM
 * numerics and determinism; te-differences.md — TransformerEngine defaults and the options for
 * the other behaviour; distributed.md — multi-rank calls.
 */
#ifndef GROUPLIN_H
#define GROUPLIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported symbols: the library is built with hidden visibility, and only what this header
 * declares with GLN_API is part of its ABI. */
#if defined(_WIN32)
#define GLN_API
#elif defined(__GNUC__) || defined(__clang__)
#define GLN_API __attribute__((visibility("default")))
#else
#define GLN_API
#endif

#define GLN_VERSION_MAJOR 0
#define GLN_VERSION_MINOR 1
#define GLN_VERSION_PATCH 0

/* ============================================================================================
 * Status, errors, logging
 * ========================================================================================== */

typedef enum gln_status {
    GLN_STATUS_SUCCESS = 0,
    GLN_STATUS_INVALID_ARGUMENT = 1, /* bad pointer, shape, dtype, split, option value */
    GLN_STATUS_NOT_SUPPORTED = 2,    /* valid request this build/backend/recipe cannot do */
    GLN_STATUS_OUT_OF_MEMORY = 3,
    GLN_STATUS_INVALID_STATE = 4,    /* e.g. backward twice on one context, empty wgrad queue */
    GLN_STATUS_BACKEND_ERROR = 5,    /* CUDA / cuBLASLt / BLAS failure */
    GLN_STATUS_COMM_ERROR = 6,       /* MPI / NCCL failure, or ranks disagree */
    GLN_STATUS_INTERNAL_ERROR = 7
} gln_status_t;

GLN_API const char *gln_status_string(gln_status_t status);
/* Detail of the last failure on this thread ("" when none).  Valid until the next failing call. */
GLN_API const char *gln_last_error(void);
GLN_API void gln_clear_error(void);

typedef enum gln_log_level {
    GLN_LOG_ERROR = 0,
    GLN_LOG_WARNING = 1,
    GLN_LOG_INFO = 2,
    GLN_LOG_DEBUG = 3
} gln_log_level_t;
typedef void (*gln_log_fn)(gln_log_level_t level, const char *message, void *user);
/* Process-wide; pass NULL to silence.  Errors are also reported here when a callback is set.
 * Safe at any time, from any thread, also while other threads' calls are failing: each message
 * reaches a callback together with that callback's `user`, and once this returns the previous
 * callback is running nowhere and is never called again (its `user` may be freed).  Callbacks may
 * run on several threads at once.  A callback may call the library; a gln_set_log_callback made
 * inside a callback takes effect when that callback returns. */
GLN_API void gln_set_log_callback(gln_log_fn fn, void *user);

GLN_API void gln_version(int *major, int *minor, int *patch);

/* ============================================================================================
 * Data types and scalar numerics (round to nearest even, saturate FP8 to ±max, NaN kept)
 * ========================================================================================== */

typedef enum gln_dtype {
    GLN_DTYPE_FP32 = 0,
    GLN_DTYPE_BF16 = 1,
    GLN_DTYPE_FP16 = 2,
    GLN_DTYPE_FP8_E4M3 = 3, /* OCP "fn": max 448, no Inf, NaN = S.1111.111 */
    GLN_DTYPE_FP8_E5M2 = 4, /* IEEE-like: max 57344 */
    GLN_DTYPE_E8M0 = 5,     /* unsigned power-of-two scale, code 255 = NaN */
    GLN_DTYPE_INT32 = 6,
    GLN_DTYPE_INT64 = 7,
    GLN_DTYPE_COUNT_ = 8
} gln_dtype_t;

GLN_API size_t gln_dtype_size(gln_dtype_t dtype);        /* 0 for an invalid dtype */
GLN_API const char *gln_dtype_name(gln_dtype_t dtype);   /* "fp32", "bf16", ... ; "invalid" */
GLN_API int gln_dtype_is_fp8(gln_dtype_t dtype);
GLN_API float gln_fp8_max(gln_dtype_t fp8_dtype);        /* 448, 57344; 0 for non-FP8 */

GLN_API uint16_t gln_fp32_to_bf16(float x);
GLN_API float gln_bf16_to_fp32(uint16_t bits);
GLN_API uint16_t gln_fp32_to_fp16(float x);
GLN_API float gln_fp16_to_fp32(uint16_t bits);
GLN_API uint8_t gln_fp32_to_fp8(float x, gln_dtype_t fp8_dtype); /* saturating; E4M3 or E5M2 */
GLN_API float gln_fp8_to_fp32(uint8_t bits, gln_dtype_t fp8_dtype);

typedef enum gln_e8m0_rounding {
    GLN_E8M0_ROUND_UP = 0,    /* TE / cuBLAS: exponent of amax/fp8_max rounded toward +inf */
    GLN_E8M0_ROUND_FLOOR = 1  /* OCP MX spec: floor(log2(amax)) - emax_elem */
} gln_e8m0_rounding_t;
/* E8M0 code for a block whose max |x| is `amax`, for data in fp8_dtype. */
GLN_API uint8_t gln_e8m0_from_amax(float amax, gln_dtype_t fp8_dtype, gln_e8m0_rounding_t rounding);
GLN_API float gln_e8m0_to_fp32(uint8_t code);            /* 2^(code-127); NaN for 255 */
GLN_API float gln_e8m0_inverse(uint8_t code);            /* exact 2^(127-code); NaN for 255 */

/* ============================================================================================
 * Contexts and backends
 * ========================================================================================== */

typedef struct gln_context gln_context_t;

typedef enum gln_backend_kind {
    GLN_BACKEND_CPU = 0,  /* always built: the reference backend */
    GLN_BACKEND_CUDA = 1  /* built when the CUDA toolkit is found (GLN_CUDA) */
} gln_backend_kind_t;

/* A framework's allocator for the context's device scratch (for example PyTorch's caching
 * allocator): `alloc` returns `bytes` of backend memory usable in stream order on `stream` (NULL
 * on failure); `free` returns it, in stream order on `stream`.  Both NULL = the backend's own
 * stream-ordered pool (cudaMallocAsync on CUDA). */
typedef void *(*gln_alloc_fn)(size_t bytes, void *stream, void *user);
typedef void (*gln_free_fn)(void *ptr, void *stream, void *user);

typedef struct gln_context_options {
    size_t size;                 /* sizeof(gln_context_options_t) */
    gln_backend_kind_t backend;
    int device;                  /* CUDA device ordinal; ignored on the CPU */
    int num_threads;             /* CPU threads for BLAS; 0 = library default */
    /* CUDA: the stream every operation of the context is enqueued on (a cudaStream_t, borrowed,
     * never destroyed by the library); NULL = the context creates and owns a non-blocking
     * stream.  Must be NULL on the CPU. */
    void *stream;
    gln_alloc_fn alloc;          /* scratch allocator: both or neither of alloc / free */
    gln_free_fn free;
    void *alloc_user;            /* passed to alloc / free */
} gln_context_options_t;
#define GLN_CONTEXT_OPTIONS_INIT {sizeof(gln_context_options_t), GLN_BACKEND_CPU, 0, 0, NULL, NULL, NULL, NULL}

/* 1 when the backend was compiled in and (for CUDA) a device is present. */
GLN_API int gln_backend_available(gln_backend_kind_t backend);
GLN_API const char *gln_backend_name(gln_backend_kind_t backend);

/* On the CPU backend, creation also makes OpenBLAS map the GEMM buffers of the context's
 * threads (128 MiB of address space each in the x86-64 builds of Debian and Ubuntu; one pool
 * for all contexts, kept until exit), so that under an address-space limit (ulimit -v) this
 * returns GLN_STATUS_OUT_OF_MEMORY instead of OpenBLAS retrying the mapping forever in the
 * first GEMM.  Under such a limit also start the process with OPENBLAS_NUM_THREADS=1:
 * OpenBLAS's own worker threads, which grouplin never uses, map a buffer each when the library
 * is loaded, and one that cannot retries forever and keeps the process from exiting.  Then
 * options->num_threads gives grouplin its threads. */
GLN_API gln_status_t gln_context_create(const gln_context_options_t *options, gln_context_t **ctx);
GLN_API gln_status_t gln_context_destroy(gln_context_t *ctx);
GLN_API gln_backend_kind_t gln_context_backend(const gln_context_t *ctx);
/* Move the context to another stream (a cudaStream_t; NULL = back to the context's own stream),
 * for example to follow torch.cuda.current_stream().  Work already enqueued stays on the old
 * stream; the new stream is made to wait for it (an event), so the context's operations stay
 * ordered.  The CPU backend accepts only NULL. */
GLN_API gln_status_t gln_context_set_stream(gln_context_t *ctx, void *stream);
/* The stream the context enqueues on (a cudaStream_t; NULL on the CPU). */
GLN_API void *gln_context_stream(const gln_context_t *ctx);
/* Errors only the device can see (device-resident splits that are negative or sum past the
 * rows: kernels clamp them so nothing is read or written out of bounds).  The device records the
 * first such error in a word of the context; this call reads it after synchronizing the context's
 * stream, returns GLN_STATUS_INVALID_ARGUMENT with a message naming the offending call when one
 * was recorded (and clears it), else GLN_STATUS_SUCCESS.  Like ncclCommGetAsyncError. */
GLN_API gln_status_t gln_context_async_error(gln_context_t *ctx);

/* Memory in the backend's space (host for the CPU backend). */
GLN_API gln_status_t gln_malloc(gln_context_t *ctx, size_t bytes, void **ptr);
GLN_API gln_status_t gln_free(gln_context_t *ctx, void *ptr);
typedef enum gln_copy_kind {
    GLN_COPY_HOST_TO_BACKEND = 0,
    GLN_COPY_BACKEND_TO_HOST = 1,
    GLN_COPY_BACKEND_TO_BACKEND = 2
} gln_copy_kind_t;
GLN_API gln_status_t gln_memcpy(gln_context_t *ctx, void *dst, const void *src, size_t bytes,
                        gln_copy_kind_t kind);
GLN_API gln_status_t gln_synchronize(gln_context_t *ctx);

/* ============================================================================================
 * Tensors (non-owning descriptors)
 * ========================================================================================== */

/* Size limits, the same for every entry point: each dimension (rows, cols, in / out features,
 * tokens, a split, a sum of splits) must lie in [0, GLN_MAX_DIM], and each tensor or buffer the
 * library sizes (rows·cols of a tensor, N·K_out·K_in of a layer's packed weights, T·E router
 * logits, ...) may hold at most GLN_MAX_ELEMS elements.  A call past either limit fails with
 * GLN_STATUS_INVALID_ARGUMENT naming the argument.  With these limits no byte size the library
 * computes (8-byte elements, padded scale grids) comes near int64 or 64-bit size_t overflow. */
#define GLN_MAX_DIM ((int64_t)1 << 56)
#define GLN_MAX_ELEMS ((int64_t)1 << 56)

typedef enum gln_scaling_mode {
    GLN_SCALING_NONE = 0,       /* high precision (fp32 / bf16 / fp16) */
    GLN_SCALING_TENSOR = 1,     /* FP8, one FP32 scale per tensor (delayed or current scaling) */
    GLN_SCALING_MXFP8_1D = 2,   /* FP8, one E8M0 scale per 32 elements */
    GLN_SCALING_BLOCK_1D = 3,   /* FP8, one FP32 scale per 1x128 (rowwise) / 128x1 (columnwise) */
    GLN_SCALING_BLOCK_2D = 4    /* FP8, one FP32 scale per 128x128 tile */
} gln_scaling_mode_t;

/*
 * A 2-D tensor [rows, cols].  High precision: dtype + data.  Quantized: dtype is the FP8 format
 * and the buffers follow the layout of gln_quant_layout() for the scaling mode:
 *
 *   mode      data [R,C]   col_data            scale_inv (row)              col_scale_inv
 *   TENSOR    fp8          fp8 [C,R] (transp.) fp32 [1]                     fp32 [1] (same value)
 *   MXFP8_1D  fp8          fp8 [R,C] (NOT tr.) e8m0 [pad128(R), pad4(⌈C/32⌉)] e8m0 [pad4(⌈R/32⌉), pad128(C)]
 *   BLOCK_1D  fp8          fp8 [C,R] (transp.) fp32 [⌈C/128⌉, pad4(R)]       fp32 [⌈R/128⌉, pad4(C)]
 *   BLOCK_2D  fp8          fp8 [C,R] (transp.) fp32 [⌈R/128⌉, pad4(⌈C/128⌉)] fp32 [⌈C/128⌉, pad4(⌈R/128⌉)]
 *
 * "Rowwise" copies have their blocks along C (for GEMMs reducing over C), "columnwise" copies
 * along R.  Partial blocks at the edges use the amax of their valid elements (equivalent to zero
 * padding), so any R, C >= 0 is legal.  Either copy may be absent (NULL) when not needed.
 */
typedef struct gln_tensor {
    gln_dtype_t dtype;
    int64_t rows;
    int64_t cols;
    void *data;
    gln_scaling_mode_t scaling;
    void *scale_inv;       /* rowwise decode scales */
    void *col_data;        /* columnwise data */
    void *col_scale_inv;   /* columnwise decode scales */
    float *amax;           /* per-tensor modes: amax (written by current, max-accumulated by delayed) */
    float *scale;          /* per-tensor modes: encode scale (read by delayed, written by current) */
} gln_tensor_t;

/* A plain high-precision tensor descriptor. */
GLN_API gln_tensor_t gln_tensor_make(gln_dtype_t dtype, int64_t rows, int64_t cols, void *data);

/* Byte sizes of each buffer of a quantized (or plain) tensor of shape [rows, cols]. */
typedef struct gln_quant_layout {
    size_t data_bytes;
    size_t col_data_bytes;
    size_t scale_bytes;         /* rowwise scale_inv buffer */
    size_t col_scale_bytes;     /* columnwise scale_inv buffer */
    int64_t scale_rows, scale_cols;          /* rowwise scale grid (padded) */
    int64_t col_scale_rows, col_scale_cols;  /* columnwise scale grid (padded) */
} gln_quant_layout_t;
GLN_API gln_status_t gln_quant_layout(gln_scaling_mode_t mode, gln_dtype_t dtype, int64_t rows, int64_t cols,
                              gln_quant_layout_t *layout);

/*
 * A grouped tensor: N members packed back to back in one buffer of `rows` rows (rows may exceed
 * the sum of splits: trailing rows are neither read nor written).  Member i has splits[i] rows
 * starting at row Σ_{j<i} splits[j].  Quantized grouped tensors place member i's data at the
 * same element offset in data / col_data (col_data members are transposed where the mode
 * transposes), and member i's scales at gln_grouped_scale_offsets()[i].  Per-tensor modes keep
 * scale / scale_inv / amax as arrays of N floats.
 */
typedef struct gln_grouped_tensor {
    int32_t num;             /* N >= 1 */
    const int64_t *splits;   /* [N] member row counts, each >= 0 */
    int splits_on_backend;   /* 0: host memory; 1: backend memory (grouped path on CUDA) */
    gln_tensor_t packed;     /* rows = allocated rows, cols = common last dim */
} gln_grouped_tensor_t;

/* Element offsets of each member's scales in the rowwise / columnwise scale buffers, [N+1]
 * each (host splits).  Total scale buffer sizes are offsets[N] elements.  The members must fit
 * one packed tensor: each split >= 0, their sum <= GLN_MAX_DIM and the sum times cols <=
 * GLN_MAX_ELEMS; otherwise GLN_STATUS_INVALID_ARGUMENT. */
GLN_API gln_status_t gln_grouped_scale_offsets(gln_scaling_mode_t mode, int32_t num, const int64_t *splits,
                                       int64_t cols, int64_t *row_offsets, int64_t *col_offsets);
/* Upper bound on scale-buffer elements for any splits summing to <= rows (graph-safe sizing). */
GLN_API gln_status_t gln_grouped_scale_bound(gln_scaling_mode_t mode, int32_t num, int64_t rows,
                                     int64_t cols, int64_t *row_elems, int64_t *col_elems);

/* ============================================================================================
 * Quantization
 * ========================================================================================== */

typedef struct gln_quant_config {
    size_t size;
    gln_scaling_mode_t mode;        /* TENSOR, MXFP8_1D, BLOCK_1D or BLOCK_2D */
    gln_dtype_t fp8_dtype;          /* GLN_DTYPE_FP8_E4M3 or GLN_DTYPE_FP8_E5M2 */
    int rowwise;                    /* produce data / scale_inv */
    int columnwise;                 /* produce col_data / col_scale_inv */
    int delayed;                    /* TENSOR only: 1 = use out->scale (delayed scaling) and
                                       max-accumulate amax into *out->amax; 0 = current scaling */
    float amax_epsilon;             /* current / block: amax floor (0 = off) */
    int power_2_scale;              /* current / block: round the scale down to a power of two */
    gln_e8m0_rounding_t e8m0_rounding;
    /* --- version 2 (the first version ends here: size = offsetof(.., amax_nan_propagate)) */
    int amax_nan_propagate;         /* 0 (default) = every amax ignores NaN elements, as TE's
                                       fmaxf reductions (a NaN still encodes as FP8 NaN);
                                       1 = a NaN element makes its amax NaN: per-tensor scale 1
                                       (current) or a NaN accumulated amax (delayed), MXFP8 block
                                       code 255, block scale 1 */
} gln_quant_config_t;
#define GLN_QUANT_CONFIG_INIT                                                                    \
    {sizeof(gln_quant_config_t), GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, 1, 0, 0, 0.0f, 0,     \
     GLN_E8M0_ROUND_UP, 0}

/* Quantize a high-precision tensor `in` into the buffers of `out` (out->dtype = FP8 format,
 * out->scaling = cfg->mode, buffers sized by gln_quant_layout). */
GLN_API gln_status_t gln_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg, const gln_tensor_t *in,
                          gln_tensor_t *out);
/* Dequantize one copy (columnwise = 0: rowwise data; 1: columnwise data) into `out`
 * (high precision, shape [rows, cols] of the logical tensor — transposed copies are
 * transposed back). */
GLN_API gln_status_t gln_dequantize(gln_context_t *ctx, const gln_tensor_t *in, int columnwise,
                            gln_tensor_t *out);
/* Per-member quantization of a grouped tensor (per-member amax / scales; empty members
 * allowed).  For TENSOR mode with delayed = 1, out->packed.scale holds N encode scales and
 * out->packed.amax N accumulating amaxes. */
GLN_API gln_status_t gln_grouped_quantize(gln_context_t *ctx, const gln_quant_config_t *cfg,
                                  const gln_grouped_tensor_t *in, gln_grouped_tensor_t *out);
/* Rearrange compact MXFP8 scales into the cuBLAS 128x4-tile order; padding becomes 0.
 * columnwise = 1 swizzles the transposed grid of a columnwise scale buffer. */
GLN_API gln_status_t gln_mxfp8_swizzle_scales(gln_context_t *ctx, int64_t rows, int64_t cols, int columnwise,
                                      const uint8_t *compact, uint8_t *swizzled);

/* Scale from amax, per-tensor (current / block scaling rule): epsilon floor, 1 on 0/Inf/NaN,
 * value_for_inf when fp8_max/amax overflows, optional power-of-two truncation. */
GLN_API float gln_scale_from_amax(float amax, float fp8_max, int power_2_scale, float epsilon,
                          float value_for_inf);

/* Delayed scaling: the state is caller-owned, amax_history[history_len][num_slots] (row 0 = the
 * newest) and scale[num_slots]; fp8_max[num_slots] per slot.  One update step per slot, as TE's
 * bulk update (the one its modules run): a slot whose newest amax (row 0) is exactly 0 (e.g. an
 * expert that got no tokens) is left untouched — no roll, scale kept.  Otherwise take the amax
 * ("max" over the whole window, NaN entries ignored, or "most recent"), roll the window and zero
 * row 0, then scale = fp8_max·2^-margin / amax when amax is finite and > 0 (else keep), FLT_MAX
 * on overflow.  INVALID_ARGUMENT unless num_slots >= 1, history_len >= 1, history_len·num_slots
 * <= GLN_MAX_ELEMS, margin in [-126, 126], algo MAX or MOST_RECENT, every fp8_max finite and > 0
 * (and, for _ex, opts->always_roll and opts->amax_nan_propagate 0 or 1). */
typedef enum gln_amax_algo { GLN_AMAX_ALGO_MAX = 0, GLN_AMAX_ALGO_MOST_RECENT = 1 } gln_amax_algo_t;
GLN_API gln_status_t gln_delayed_scaling_update(int32_t num_slots, int32_t history_len, float *amax_history,
                                        float *scale, const float *fp8_max, int margin,
                                        gln_amax_algo_t algo);
/* Variants of the update step (versioned: start from GLN_DELAYED_UPDATE_OPTIONS_INIT). */
typedef struct gln_delayed_update_options {
    size_t size;
    int always_roll;         /* 1 = roll every slot even when its newest amax is 0 (TE's non-bulk
                                kernel); 0 (default) = TE's bulk update */
    int amax_nan_propagate;  /* 1 = a NaN in the window makes the "max" amax NaN (scale kept);
                                0 (default) = NaN entries are ignored, as fmaxf does in TE */
} gln_delayed_update_options_t;
#define GLN_DELAYED_UPDATE_OPTIONS_INIT {sizeof(gln_delayed_update_options_t), 0, 0}
/* gln_delayed_scaling_update with options (opts = NULL: the defaults). */
GLN_API gln_status_t gln_delayed_scaling_update_ex(int32_t num_slots, int32_t history_len, float *amax_history,
                                           float *scale, const float *fp8_max, int margin,
                                           gln_amax_algo_t algo,
                                           const gln_delayed_update_options_t *opts);

/* ============================================================================================
 * GEMMs, dbias, amax (FP32 accumulation, one rounding of the output; quantized operands as
 * docs/numerics.md: per-tensor FP8 multiplies raw FP8 values and folds both scale_inv into alpha,
 * MXFP8 and power-of-two block scales are dequantized exactly, FP32 block scales are applied
 * per 128-wide block of the reduction dimension)
 * ========================================================================================== */

/* Layout letters (TE convention, row-major view): D = op(B) · op(A)
 *   TN: D[m,n] = B[m,k] · A[n,k]ᵀ   (fprop: A = W, B = x)    quantized: A rowwise, B rowwise
 *   NN: D[m,n] = B[m,k] · A[k,n]    (dgrad: A = W, B = dy)   quantized: A columnwise, B rowwise
 *   NT: D[n,k] = B[m,n]ᵀ · A[m,k]   (wgrad: A = x, B = dy)   quantized: A columnwise, B columnwise
 * "Columnwise" is the copy whose blocks run along rows, i.e. along the reduction dimension. */
typedef enum gln_gemm_layout { GLN_LAYOUT_TN = 0, GLN_LAYOUT_NN = 1, GLN_LAYOUT_NT = 2 } gln_gemm_layout_t;

/* D = op(A,B) (+ bias[cols of D], added in FP32 before the single rounding) (+ D if accumulate).
 * D is fp32 / bf16 / fp16.  A and B are high precision or quantized (any scaling mode, each
 * copy the layout needs must be present). */
GLN_API gln_status_t gln_gemm(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                      const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias,
                      int accumulate);

/* One launch for N experts.  Per layout:
 *   TN (fprop): A = weights[N] (list), B = grouped x, D = grouped y, bias = biases[N] or NULL
 *   NN (dgrad): A = weights[N], B = grouped dy, D = grouped dx
 *   NT (wgrad): A = grouped x (a_grouped), B = grouped dy, D = d_list[N] outputs [K_out, K_in]
 * Empty experts: no rows written; for NT the output is zeroed (or left as is when accumulating). */
typedef struct gln_grouped_gemm_args {
    size_t size;
    gln_gemm_layout_t layout;
    const gln_tensor_t *a_list;           /* [N] for TN / NN */
    const gln_grouped_tensor_t *a_grouped;/* NT */
    const gln_grouped_tensor_t *b;
    gln_grouped_tensor_t *d_grouped;      /* TN / NN */
    gln_tensor_t *d_list;                 /* NT: [N] */
    const gln_tensor_t *bias_list;        /* TN: [N] (each [1, K_out]) or NULL */
    int accumulate;
    /* --- version 2 (the first version ends here: size = offsetof(.., block_scales_pow2)) */
    /* BLOCK_1D / BLOCK_2D operands: 1 = the caller knows every decode scale is a power of two
     * (quantized with power_2_scale, the layer's fp8-block default), so dequantizing first is
     * exact: the CUDA backend then dequantizes to bf16 on the device and runs one
     * grouped bf16 GEMM, graph-capturable.  0 = unknown: the CUDA backend applies the scales per
     * 128-block of K in a per-expert loop (host splits).  The CPU backend reads the scales and
     * decides itself.  A scale that is not a power of two under 1 is rounded into bf16 with its
     * element (bf16 precision, no longer exact). */
    int block_scales_pow2;
} gln_grouped_gemm_args_t;
#define GLN_GROUPED_GEMM_ARGS_INIT {sizeof(gln_grouped_gemm_args_t), GLN_LAYOUT_TN, 0, 0, 0, 0, 0, 0, 0, 0}
GLN_API gln_status_t gln_grouped_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *args);

/* Per-member column sums of a high-precision grouped tensor into dbias[N] ([1, cols] each),
 * accumulated in FP32 in row order (deterministic), one rounding to dbias dtype.  Empty
 * members give 0 (or leave dbias unchanged when accumulate = 1). */
GLN_API gln_status_t gln_grouped_dbias(gln_context_t *ctx, const gln_grouped_tensor_t *dy, gln_tensor_t *dbias,
                               int accumulate);
/* max |x| over a high-precision tensor; NaN elements are ignored (TE's fmaxf rule; all NaN gives 0). */
GLN_API gln_status_t gln_amax(gln_context_t *ctx, const gln_tensor_t *x, float *amax);
/* gln_amax with the amax_nan_propagate choice of gln_quant_config_t: 0 = gln_amax; 1 = a NaN
 * element makes the result NaN (|x[i]| of the lowest NaN index i, sign cleared). */
GLN_API gln_status_t gln_amax_ex(gln_context_t *ctx, const gln_tensor_t *x, int nan_propagate, float *amax);
/* Element-wise conversion between high-precision dtypes (same shape). */
GLN_API gln_status_t gln_cast(gln_context_t *ctx, const gln_tensor_t *in, gln_tensor_t *out);

/* ============================================================================================
 * Communicators
 * ========================================================================================== */

/* Multi-rank calls fail together (docs/distributed.md).  Every collective entry point — the
 * gln_comm_* collectives, gln_sharded_weights_gather_*, and gln_grouped_linear_forward /
 * backward over a sharded group — first agrees with one small allreduce on every rank's local
 * verdict and on the call's shape (which call; count, dtype, op; for a layer the recipe, fp8
 * format and whether dx / wgrad are wanted), then runs the collective.  A bad argument on one
 * rank fails the call on every rank with the same status (the others' message: "rank R
 * failed"); a shape that differs between ranks fails it everywhere with COMM_ERROR ("ranks
 * disagree on <field>").  Still the caller's duty: live handles (comm, group, layer) and
 * buffers of the agreed size on every rank, the same sequence of calls, and caller-written
 * gln_dist_weights_t hooks that fail together themselves.  A rank that passes a NULL
 * communicator (gln_comm_t *), or MPI_COMM_NULL to gln_comm_create_mpi, is outside the
 * collective: it fails alone and cannot be agreed with, so the other ranks would wait for it;
 * every rank passing a communicator of the same group is the caller's duty too. */
typedef struct gln_comm gln_comm_t;
typedef enum gln_reduce_op { GLN_REDUCE_SUM = 0, GLN_REDUCE_MAX = 1 } gln_reduce_op_t;

/* A communicator is bound to a context `ctx` (not owned; it must outlive the communicator): its
 * buffers live in that context's memory and its collectives are ordered on the context's stream
 * (the host never waits for the GPU).  ctx = NULL means host memory, like a CPU context. */
/* One rank, no dependencies: every collective is a (stream-ordered) copy in ctx's memory. */
GLN_API gln_status_t gln_comm_create_self(gln_context_t *ctx, gln_comm_t **comm);
/* Over MPI (built with GLN_MPI): `mpi_comm` points to an MPI_Comm, or NULL for MPI_COMM_WORLD.
 * MPI must already be initialized by the caller.  Collective over mpi_comm: a bad argument on one
 * rank (comm NULL included) fails creation on every rank.  ctx NULL or a CPU context: host
 * memory.  A CUDA context: device memory of that context, for several ranks sharing one GPU or
 * when NCCL is not available; each collective then SYNCHRONIZES the context's stream (MPI is not
 * stream-ordered): a CUDA-aware MPI (MPIX_Query_cuda_support) gets the device pointers after
 * the stream is drained, any other MPI gets copies staged through page-locked host buffers (the
 * stream is synchronized by the copy to the host; the buffer is grown to the largest message and
 * freed by gln_comm_destroy).  Inside a CUDA graph capture of the stream every collective fails
 * with NOT_SUPPORTED on every rank instead of breaking the capture (capture over NCCL).  The
 * asynchronous forms the sharded group uses (prefetch, async finalize) complete before they
 * return.  GLN_STATUS_NOT_SUPPORTED without MPI. */
GLN_API gln_status_t gln_comm_create_mpi(gln_context_t *ctx, const void *mpi_comm, gln_comm_t **comm);
GLN_API int gln_mpi_available(void);
/* Over NCCL (built with GLN_NCCL): device memory of a CUDA context, collectives enqueued on its
 * stream.  The unique id is created by one rank (gln_nccl_id_create) and handed to every rank by
 * the caller (any channel: it is plain bytes); creation is collective over `size` ranks.  NCCL's
 * errors (including ncclCommGetAsyncError, checked by every call) give GLN_STATUS_COMM_ERROR with
 * NCCL's message.  GLN_STATUS_NOT_SUPPORTED without NCCL. */
typedef struct gln_nccl_id {
    unsigned char bytes[128]; /* an ncclUniqueId */
} gln_nccl_id_t;
GLN_API int gln_nccl_available(void);
GLN_API gln_status_t gln_nccl_id_create(gln_nccl_id_t *id);
GLN_API gln_status_t gln_comm_create_nccl(gln_context_t *ctx, const gln_nccl_id_t *id, int rank, int size,
                                  gln_comm_t **comm);
/* NCCL bootstrapped over MPI: rank 0 of `mpi_comm` (NULL: MPI_COMM_WORLD) creates the id and
 * broadcasts it; ranks and size are MPI's.  The MPI communicator also carries the small host-side
 * agreement of every collective (docs/distributed.md), so those never wait for the GPU.  Needs
 * both GLN_MPI and GLN_NCCL. */
GLN_API gln_status_t gln_comm_create_nccl_mpi(gln_context_t *ctx, const void *mpi_comm, gln_comm_t **comm);
GLN_API gln_status_t gln_comm_destroy(gln_comm_t *comm);
GLN_API int gln_comm_rank(const gln_comm_t *comm);
GLN_API int gln_comm_size(const gln_comm_t *comm);
/* The context the communicator was created with (NULL: host memory). */
GLN_API gln_context_t *gln_comm_context(const gln_comm_t *comm);
/* recv gets size·count elements: rank r's send at r·count. */
GLN_API gln_status_t gln_comm_allgather(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                gln_dtype_t dtype);
/* send has size·count elements; recv gets the sum over ranks of block `rank`. */
GLN_API gln_status_t gln_comm_reduce_scatter(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                     gln_dtype_t dtype, gln_reduce_op_t op);
GLN_API gln_status_t gln_comm_allreduce(gln_comm_t *comm, const void *send, void *recv, size_t count,
                                gln_dtype_t dtype, gln_reduce_op_t op);
GLN_API gln_status_t gln_comm_barrier(gln_comm_t *comm);

/* ============================================================================================
 * Distributed weights: the protocol
 * ========================================================================================== */

/* Handed to the layer in place of plain weights.  All hooks receive `impl`.  Materialized
 * weights are N full [K_out, K_in] tensors in backend memory, either high precision or already
 * quantized; the layer quantizes high-precision ones itself, uses them for one GEMM stage and
 * hands them back through release() right after — it never keeps or caches them. */
typedef struct gln_dist_weights {
    size_t size;
    void *impl;
    int32_t num_experts;
    int64_t out_features, in_features;
    /* whether the (sharded) parameters need gradients — read from the group, never from copies */
    int (*requires_grad)(void *impl);
    gln_status_t (*materialize_forward)(void *impl, gln_tensor_t *weights /* [N] out */);
    gln_status_t (*materialize_backward)(void *impl, gln_tensor_t *weights /* [N] out */);
    gln_status_t (*release)(void *impl, gln_tensor_t *weights /* [N] from a materialize */);
    /* Full-size FP32 buffer [K_out, K_in] into which expert i's wgrad GEMM writes (overwrite). */
    gln_status_t (*grad_buffer)(void *impl, int32_t expert, float **buffer);
    /* Reduce the N full wgrads (which are the grad_buffer()s) into the shards' main_grad:
     * accumulate = 0 overwrites.  May start asynchronously: then *pending is set to 1 and
     * wait() must be called before main_grad is read; the layer itself calls wait() before
     * its next backward uses the group (wait() must be a no-op when nothing is pending). */
    gln_status_t (*finalize_grads)(void *impl, int accumulate, int *pending);
    /* Complete what finalize_grads left pending, in stream order: after it, work enqueued on the
     * context's stream sees the final main_grad (on a GPU the host does not wait). */
    gln_status_t (*wait)(void *impl);
    /* --- version 2 (version 1 ends here: size = GLN_DIST_WEIGHTS_V1_SIZE) */
    /* Optional (NULL: none).  Start the gather of the next materialize_forward (direction 0) or
     * materialize_backward (1) now, so that it overlaps the work enqueued after this call (the
     * current layer's GEMMs); that materialize then only waits for it.  Collective like the
     * materialize it serves. */
    gln_status_t (*prefetch)(void *impl, int direction);
} gln_dist_weights_t;
#define GLN_DIST_WEIGHTS_V1_SIZE offsetof(gln_dist_weights_t, prefetch)

/* The built-in implementer: N expert weights flattened into one buffer, an equal padded shard
 * per rank, one all-gather per materialization, one FP32 reduce-scatter into main_grad. */
typedef struct gln_sharded_weights gln_sharded_weights_t;
typedef struct gln_sharded_weights_config {
    size_t size;
    int32_t num_experts;
    int64_t out_features, in_features;
    gln_dtype_t working_dtype;   /* dtype gathered for the GEMMs: bf16 or fp32 */
    int requires_grad;
    int async_finalize;          /* finalize returns pending; wait() completes it */
    /* --- version 2 (version 1 ends here: size = GLN_SHARDED_WEIGHTS_CONFIG_V1_SIZE) */
    /* 1: materialize_forward gathers FP8 instead of the working dtype (rowwise copies), bytes
     * equal to gln_quantize of each full working-dtype weight, which the layer uses without
     * quantizing.  fp8_quant must be the layer recipe's weight quantization (the layer cannot
     * tell another one apart):
     *   TENSOR, delayed 0 (FP8 current scaling): each rank quantizes its shard with expert e's
     *     scale from the MAX all-reduce of every rank's amax of its part of expert e;
     *   MXFP8_1D: in_features % 128 == 0; shards of whole 128-element rows (1x32 blocks never
     *     straddle two ranks), E8M0 codes gathered with the data (with quantized_shard: shards of
     *     whole 32-row groups, see there);
     *   BLOCK_2D (FP8 block scaling): each expert is padded to a multiple of 128 rows in the flat
     *     layout (zero rows; gln_sharded_weights_shard's offsets count them) and shards hold
     *     whole 128-row tiles; the tile scales are gathered with the data.
     * Without quantized_shard each forward materialization quantizes the working shard anew and
     * materialize_backward gathers the working dtype (the layer quantizes it columnwise). */
    int fp8_gather;
    gln_quant_config_t fp8_quant;
    /* --- version 3 (version 2 ends here: size = GLN_SHARDED_WEIGHTS_CONFIG_V2_SIZE) */
    /* 1 (needs fp8_gather = 1): the group keeps this rank's shard QUANTIZED — the FP8 bytes of
     * the working shard and their scales, as fp8_gather makes them — and refreshes it only when
     * the working shard changes: in gln_sharded_weights_load_full, gln_sharded_weights_sync_working,
     * gln_sharded_weights_requantize and gln_sharded_weights_optimizer_step (collective then).
     * Both materializations then gather the stored FP8 shards and nothing is quantized per step:
     * materialize_forward hands the rowwise copies (the bytes and scales fp8_gather gives),
     * materialize_backward the columnwise copy the dgrad needs (the layout of gln_tensor_t), and
     * every byte and scale equals gln_quantize (rowwise, resp. columnwise) of the gathered
     * working weight:
     *   TENSOR (delayed 0) and BLOCK_2D: the backward hands the same rowwise copies plus the
     *     columnwise copy made by transposing them (per-tensor col_data [K_in, K_out],
     *     col_scale_inv the same decode scale; 128x128 col_data transposed, col_scale_inv the
     *     transposed tile grid [ceil(K_in/128), pad4(ceil(K_out/128))]).  Exact: a per-tensor
     *     scale and a 128x128 tile's amax do not depend on the direction.
     *   MXFP8_1D (in_features % 128 == 0): the columnwise copy has 32x1 blocks along K_out,
     *     other bytes and codes than the rowwise one, so the group stores it as a second FP8
     *     shard, quantized from the working shard together with the rowwise one.  Each expert is
     *     padded to a multiple of 32 rows in the flat layout (zero rows;
     *     gln_sharded_weights_shard's lengths and offsets count them) and shards hold whole
     *     32-row groups, so every 32x1 block lies on one rank.  materialize_backward hands
     *     col_data [K_out, K_in] (not transposed) and col_scale_inv [pad4(ceil(K_out/32)), K_in]
     *     alone: data and scale_inv are NULL (the dgrad reads nothing else).  Stored: 2 bytes
     *     per weight element (+ 2/32 of E8M0 codes).
     * Delayed scaling and BLOCK_1D are NOT_SUPPORTED.  0 (default): fp8_gather as described
     * above. */
    int quantized_shard;
} gln_sharded_weights_config_t;
#define GLN_SHARDED_WEIGHTS_CONFIG_V1_SIZE offsetof(gln_sharded_weights_config_t, fp8_gather)
#define GLN_SHARDED_WEIGHTS_CONFIG_V2_SIZE offsetof(gln_sharded_weights_config_t, quantized_shard)
#define GLN_SHARDED_WEIGHTS_CONFIG_INIT                                                         \
    {sizeof(gln_sharded_weights_config_t), 0, 0, 0, GLN_DTYPE_BF16, 1, 0, 0, GLN_QUANT_CONFIG_INIT, 0}

/* Collective over comm: every rank passes the same configuration.  Every argument is checked
 * before any allocation (num_experts >= 1; out_features and in_features in [1, GLN_MAX_DIM];
 * working_dtype bf16 or fp32; requires_grad, async_finalize, fp8_gather, quantized_shard 0 or 1
 * (quantized_shard 1 with fp8_gather 0 is INVALID_ARGUMENT, with a mode it does not implement
 * NOT_SUPPORTED); every buffer of the group, the padded experts of a 128x128 gather or of an
 * MXFP8 quantized shard and all ranks' padded shards included, at most GLN_MAX_ELEMS elements;
 * with fp8_gather, fp8_quant valid for gln_quantize — mode NONE, a NaN or negative
 * amax_epsilon, ... are INVALID_ARGUMENT — and one the gather implements, else NOT_SUPPORTED).
 * Then one agreement: a refusal on any rank (a NULL sw included) fails create on every rank, and
 * so does any difference between ranks in the sizes, dtypes, flags, the context's backend,
 * quantized_shard or any field of fp8_quant (COMM_ERROR "ranks disagree on <field>").  comm NULL
 * fails on that rank alone (see "Multi-rank calls fail together"). */
GLN_API gln_status_t gln_sharded_weights_create(gln_context_t *ctx, gln_comm_t *comm,
                                        const gln_sharded_weights_config_t *cfg,
                                        gln_sharded_weights_t **sw);
GLN_API gln_status_t gln_sharded_weights_destroy(gln_sharded_weights_t *sw);
/* Load from a full FP32 [N, K_out, K_in] host array (identical on every rank): each rank keeps
 * its slice as FP32 master and refreshes its working copy (and, with quantized_shard, its
 * quantized shard: then collective, like sync_working). */
GLN_API gln_status_t gln_sharded_weights_load_full(gln_sharded_weights_t *sw, const float *full);
/* This rank's FP32 master shard / main_grad shard (shard_len elements each, padding included;
 * elements past the real weights are zero and stay zero) and its offset in the flat buffer.
 * The flat buffer holds the experts expert_stride elements apart: K_out·K_in, or with the zero
 * rows that pad each expert to pad128(K_out) rows (128x128 fp8_gather) or pad32(K_out) rows
 * (MXFP8 with quantized_shard), which the offsets count. */
GLN_API gln_status_t gln_sharded_weights_shard(gln_sharded_weights_t *sw, float **master, float **main_grad,
                                       int64_t *shard_len, int64_t *shard_offset);
/* After the optimizer changed the master shard: refresh the working copy (working[i] = master[i]
 * rounded to nearest even in the working dtype, for every i of the shard, padding included).
 * INVALID_STATE while a prefetched gather is outstanding (it still reads the working shard).
 * With quantized_shard it then refreshes the quantized shard as gln_sharded_weights_requantize
 * does, and is collective (every rank calls it; a refusal on one rank fails it on every rank). */
GLN_API gln_status_t gln_sharded_weights_sync_working(gln_sharded_weights_t *sw);
/* This rank's working-dtype shard, for an optimizer that writes it itself in the pass that
 * updates the master (no separate sync_working pass): *working = the buffer (backend memory,
 * shard_len elements of *dtype = cfg.working_dtype, the same slice as the master shard of
 * gln_sharded_weights_shard), *len = shard_len.  dtype and len may be NULL; working may not.
 * An optimizer that writes working[i] = master[i] rounded to nearest even in the working dtype
 * (gln_fp32_to_bf16's rounding, NaN kept) for every i of the shard, after its last change to
 * master[i], has done exactly what gln_sharded_weights_sync_working does and need not call it.
 * The padding elements hold zero in both buffers; writing them (as the rounded zero master) or
 * skipping them keeps them zero.  For an FP32 working dtype the working copy may alias the
 * master (the optimizer's write is then a no-op); callers must work whether or not it does.
 * Without quantized_shard, what the group derives from the working shard is recomputed from it
 * at every materialization (the gathered copies, the FP8 shard and its scales of fp8_gather),
 * never cached across materializations, so the next materialize sees the new values.  With
 * quantized_shard the quantized shard IS such a cache: after writing the working shard call
 * gln_sharded_weights_requantize (or write the master and call sync_working instead), else the
 * next materializations gather the old FP8 values.  Rules, the same as for
 * sync_working: write only while no prefetched gather is outstanding (this call fails with
 * INVALID_STATE while one is, and a prefetch issued after it and before the write would gather
 * the old or a torn shard); write in the order of the context's stream (on a GPU: a kernel on
 * that stream), so that gathers enqueued before the write read the old values and later ones
 * the new; a materialization that is still live keeps the values it gathered.  The buffer is
 * the group's for its whole life (the same pointer on every call).  Call
 * gln_grouped_linear_weights_updated after the step exactly as with sync_working. */
GLN_API gln_status_t gln_sharded_weights_working_shard(gln_sharded_weights_t *sw, void **working,
                                               gln_dtype_t *dtype, int64_t *len);
/* With quantized_shard: quantize the working shard into the group's quantized shard (per-tensor:
 * expert e's scale from the MAX over ranks of their amaxes of expert e, so the scales are the
 * same on every rank; 128x128: the shard's tile scales; MXFP8: its rowwise and columnwise copies
 * with their block codes, no exchange), the refresh an optimizer that wrote the
 * working shard itself (gln_sharded_weights_working_shard) must call before the next
 * materialization.  Collective: every rank calls it; it agrees first, so a refusal on one rank
 * fails it on every rank.  INVALID_STATE while a prefetched gather is outstanding (as
 * sync_working).  Enqueued in the context's stream order.  A group without quantized_shard has
 * nothing to refresh: the call returns SUCCESS at once, on every rank alike, without a collective. */
GLN_API gln_status_t gln_sharded_weights_requantize(gln_sharded_weights_t *sw);
/* Gather the full FP32 masters [N, K_out, K_in] / main_grads into a host array on every rank. */
GLN_API gln_status_t gln_sharded_weights_gather_master(gln_sharded_weights_t *sw, float *full);
GLN_API gln_status_t gln_sharded_weights_gather_main_grad(gln_sharded_weights_t *sw, float *full);
/* Live bytes of materialized (gathered) weights right now, and the peak since creation. */
GLN_API gln_status_t gln_sharded_weights_materialized_bytes(const gln_sharded_weights_t *sw, size_t *live,
                                                    size_t *peak);
/* Complete an asynchronous finalize (async_finalize = 1): main_grad is final after this.  A
 * no-op when nothing is pending; the same as calling the protocol's wait(). */
GLN_API gln_status_t gln_sharded_weights_wait(gln_sharded_weights_t *sw);
/* The protocol's prefetch hook: start the gather of the next materialization of `direction`
 * (0 forward, 1 backward) so that it overlaps the caller's next work (collective). */
GLN_API gln_status_t gln_sharded_weights_prefetch(gln_sharded_weights_t *sw, int direction);
/* The protocol table for the layer (valid while sw lives). */
GLN_API const gln_dist_weights_t *gln_sharded_weights_protocol(gln_sharded_weights_t *sw);

/* ============================================================================================
 * Optimizer: one pass over the FP32 masters that also writes the rounded working copy
 * ========================================================================================== */

typedef enum gln_optimizer_kind {
    GLN_OPTIMIZER_ADAM = 0, /* TransformerEngine's FusedAdam (adam_w_mode selects Adam / AdamW) */
    GLN_OPTIMIZER_SGD = 1   /* plain SGD, optionally with momentum (PyTorch's SGD, dampening 0) */
} gln_optimizer_kind_t;

/* Hyper-parameters of gln_optimizer_step.  Versioned: start from GLN_OPTIMIZER_CONFIG_INIT,
 * whose values are TE FusedAdam's defaults.  The update of element i, in FP32, one IEEE
 * operation at a time in exactly this order (no fused multiply-add; bitwise the same on every
 * backend), with bc1 = 1 - beta1^step and bc2 = 1 - beta2^step computed in double on the host
 * and rounded to FP32 once (TE's std::pow), w = master[i], g = grad[i], m = exp_avg[i],
 * v = exp_avg_sq[i]:
 *
 *   ADAM, adam_w_mode 0 (L2):        g = g + wd·w
 *   ADAM (both modes):               m = beta1·m + (1 - beta1)·g
 *                                    v = beta2·v + ((1 - beta2)·g)·g
 *                                    denom = sqrt(v / bc2) + eps
 *   adam_w_mode 0:                   update = (m / bc1) / denom
 *   adam_w_mode 1 (decoupled AdamW): update = (m / bc1) / denom + wd·w
 *                                    w = w - lr·update
 *   SGD:                             g = g + wd·w                   (only when wd != 0)
 *                                    momentum != 0: m = step == 1 ? g : momentum·m + g;  g = m
 *                                    w = w - lr·g
 *
 * (1 - beta) is an FP32 subtraction.  TE's adam_w_mode 1 adds wd·w to the update (scaled by lr
 * with it), which is not PyTorch's AdamW (w·(1 - lr·wd) first).  NaN: a NaN operand comes back
 * quieted with its sign and payload (the first operand's when both are NaN), a NaN made from
 * non-NaN operands (Inf - Inf, 0/0, sqrt of a negative) is 0x7FFFFFFF; NaN and Inf are not
 * skipped (TE's kernel propagates them too). */
typedef struct gln_optimizer_config {
    size_t size;               /* sizeof(gln_optimizer_config_t) */
    gln_optimizer_kind_t kind;
    float lr;                  /* finite, >= 0 */
    float beta1, beta2;        /* Adam: each in [0, 1) */
    float eps;                 /* Adam: finite, > 0 */
    float weight_decay;        /* finite, >= 0 */
    int adam_w_mode;           /* Adam: 1 = decoupled weight decay (TE's default), 0 = L2 */
    float momentum;            /* SGD: finite, in [0, 1]; 0 = none (exp_avg unused) */
    /* Adam: NULL = bc1, bc2 from `step` on the host (above).  Else backend memory holding
     * {bc1, bc2} as two floats, read by the step when it runs in stream order, so that a step
     * captured in a CUDA graph replays with the bias corrections of a counter the caller advances
     * on the device (TE FusedAdam's capturable mode, torch's step tensor); `step` must still be
     * valid (>= 1).  Both values must be finite and > 0; the step does not check them. */
    const float *bias_corrections;
} gln_optimizer_config_t;
#define GLN_OPTIMIZER_CONFIG_INIT \
    {sizeof(gln_optimizer_config_t), GLN_OPTIMIZER_ADAM, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1, 0.0f, NULL}

/* One optimizer step over n FP32 elements, in place: master, exp_avg and exp_avg_sq are read and
 * rewritten, grad is read; working (NULL: none) receives, in the same pass, each updated master
 * rounded to nearest even in working_dtype (gln_fp32_to_bf16's rounding, NaN kept): bf16, fp16,
 * or fp32 (a copy; working may then be master itself).  Every pointer is backend memory of ctx
 * (n elements each), enqueued in the order of the context's stream like every other operation;
 * the buffers may not overlap each other, except working == master for fp32.
 * step: the 1-based count of steps taken with these moments (the bias corrections; SGD: whether
 * the momentum buffer starts from the gradient).  Buffers by kind: Adam needs exp_avg and
 * exp_avg_sq; SGD with momentum needs exp_avg (the momentum buffer) and ignores exp_avg_sq; SGD
 * without momentum ignores both (NULL allowed).  Moments start at zero.
 * Checks (GLN_STATUS_INVALID_ARGUMENT naming the argument and its range): ctx and cfg not
 * NULL, cfg->size a known version, kind, lr finite >= 0, weight_decay finite >= 0; for ADAM
 * beta1 and beta2 in [0, 1), eps finite > 0, adam_w_mode 0 or 1; for SGD momentum in [0, 1];
 * step >= 1; n in [0, GLN_MAX_ELEMS]; working_dtype fp32 / bf16 / fp16 when working is given;
 * and when n > 0: master and grad not NULL, the moments the kind reads not NULL, working ==
 * master only for fp32.  n = 0 then does nothing. */
GLN_API gln_status_t gln_optimizer_step(gln_context_t *ctx, const gln_optimizer_config_t *cfg, int64_t step,
                                        float *master, const float *grad, float *exp_avg, float *exp_avg_sq,
                                        int64_t n, void *working, gln_dtype_t working_dtype);

/* The step on a sharded weight group's own shard: gln_optimizer_step(cfg, step) of this rank's
 * master shard with its main_grad (gln_sharded_weights_shard), writing the working shard in the
 * same pass — exactly what gln_optimizer_step on the shard followed by
 * gln_sharded_weights_sync_working leaves, bit for bit, for an FP32 working copy too.  exp_avg
 * and exp_avg_sq: the caller's moments of this rank's shard, shard_len backend elements each
 * (zeroed before the first step; the padding elements then stay zero with the master), with
 * gln_optimizer_step's rules per kind.  A finalize still in flight (async_finalize) is completed
 * first, in stream order; INVALID_STATE while a prefetched gather is outstanding (it still reads
 * the working shard), as for sync_working.  When the group keeps its working shard quantized, the
 * same pass records each expert's amax of the working values of this rank's shard, and the
 * shard is then requantized from them (collective over the group's communicator: every rank
 * calls it with the same arguments).  Afterwards call gln_grouped_linear_weights_updated on the
 * layers over the group, as after sync_working. */
GLN_API gln_status_t gln_sharded_weights_optimizer_step(gln_sharded_weights_t *sw, const gln_optimizer_config_t *cfg,
                                                        int64_t step, float *exp_avg, float *exp_avg_sq);

/* ============================================================================================
 * The grouped linear layer
 * ========================================================================================== */

typedef struct gln_grouped_linear gln_grouped_linear_t;
typedef struct gln_grouped_linear_saved gln_grouped_linear_saved_t;

typedef enum gln_recipe {
    GLN_RECIPE_NONE = 0,        /* activation dtype GEMMs */
    GLN_RECIPE_FP8_DELAYED = 1, /* per-tensor FP8, scales from an amax history */
    GLN_RECIPE_FP8_CURRENT = 2, /* per-tensor FP8, scales from the current amax */
    GLN_RECIPE_MXFP8 = 3,       /* 1x32 blocks, E8M0 scales */
    GLN_RECIPE_FP8_BLOCK = 4    /* 1x128 activations / gradients, 128x128 weights */
} gln_recipe_t;
GLN_API const char *gln_recipe_name(gln_recipe_t recipe);

typedef enum gln_fp8_format {
    GLN_FP8_FORMAT_E4M3 = 0,    /* E4M3 everywhere */
    GLN_FP8_FORMAT_HYBRID = 1,  /* E4M3 forward (x, W), E5M2 backward (dy) */
    /* TE's default per recipe, resolved at create: HYBRID for FP8_DELAYED and FP8_CURRENT,
     * E4M3 for MXFP8 and FP8_BLOCK (and NONE, where it is unused) */
    GLN_FP8_FORMAT_RECIPE_DEFAULT = 2
} gln_fp8_format_t;

typedef enum gln_path {
    GLN_PATH_SPLIT = 0,   /* host splits; per-expert quantize and GEMM calls */
    GLN_PATH_GROUPED = 1  /* splits may be in backend memory; one grouped launch per stage */
} gln_path_t;

/* Quantized-weight caching follows TE (is_first_microbatch None / True / False). */
typedef enum gln_microbatch {
    GLN_MICROBATCH_UNSET = 0,  /* no caching: weights quantized on every call; fused wgrad accumulates */
    GLN_MICROBATCH_FIRST = 1,  /* re-quantize weights into the cache; fused wgrad overwrites main_grad */
    GLN_MICROBATCH_NEXT = 2    /* reuse the cached quantized weights (re-quantized when the cache
                                  lacks a needed copy or gln_grouped_linear_weights_updated was
                                  called since it was filled); fused wgrad accumulates */
} gln_microbatch_t;

/* Caller-supplied parameters (non-owning).  Leave every pointer NULL for layer-owned
 * parameters, initialized N(0, init_std²) per expert from `seed`, biases zero. */
typedef struct gln_grouped_linear_params {
    void *const *weights;          /* [N] each [K_out, K_in] in param dtype, or NULL */
    void *weight_packed;           /* one [N, K_out, K_in] buffer (single_grouped_weight) */
    void *const *biases;           /* [N] each [K_out] */
    void *bias_packed;             /* one [N, K_out] buffer (single_grouped_bias) */
    float *const *main_grads;      /* [N] FP32 [K_out, K_in] (fuse_wgrad_accumulation) */
    float *main_grad_packed;       /* one FP32 [N, K_out, K_in] buffer */
    const gln_dist_weights_t *distributed; /* instead of weights: a distributed group */
} gln_grouped_linear_params_t;

typedef struct gln_grouped_linear_config {
    size_t size;
    int32_t num_experts;
    int64_t in_features, out_features;
    int bias;
    gln_dtype_t param_dtype;        /* fp32 / bf16 / fp16 */
    gln_dtype_t activation_dtype;   /* fp32 / bf16 / fp16 */
    gln_recipe_t recipe;
    gln_fp8_format_t fp8_format;
    gln_path_t path;
    int fuse_wgrad_accumulation;
    int delay_wgrad_compute;
    int single_grouped_weight;      /* 1: params.weight_packed is required (params.weights NULL,
                                       no distributed group); 0: params.weight_packed is refused */
    int single_grouped_bias;        /* 1: params.bias_packed is required (params.biases NULL);
                                       0: params.bias_packed is refused */
    int save_original_input;
    int weights_require_grad;
    /* delayed scaling */
    int amax_history_len;
    int margin;
    gln_amax_algo_t amax_algo;
    /* current / block scaling */
    int power_2_scales;             /* current scaling (default 0) */
    int block_fp32_scales;          /* block scaling: non-power-of-two scales (default 0) */
    float amax_epsilon;
    gln_e8m0_rounding_t e8m0_rounding;
    /* owned-parameter initialization */
    uint64_t seed;
    float init_std;
    gln_grouped_linear_params_t params;
    /* --- version 2 (the first version ends here: size = offsetof(.., always_roll)) */
    int always_roll;                /* delayed scaling: 1 = every update rolls every slot, even
                                       one whose newest amax is 0 (TE's non-bulk kernel); 0
                                       (default) = TE's bulk update (gln_delayed_update_options_t) */
    int amax_nan_propagate;         /* 1 = a NaN element makes its amax NaN in every cast of the
                                       recipe (gln_quant_config_t.amax_nan_propagate), in the
                                       amax history and in the delayed update's window max (the
                                       scale is then kept); 0 (default) = NaN ignored (TE) */
} gln_grouped_linear_config_t;
#define GLN_GROUPED_LINEAR_CONFIG_INIT                                                          \
    {sizeof(gln_grouped_linear_config_t), 1, 0, 0, 1, GLN_DTYPE_BF16, GLN_DTYPE_BF16,           \
     GLN_RECIPE_NONE, GLN_FP8_FORMAT_RECIPE_DEFAULT, GLN_PATH_SPLIT, 0, 0, 0, 0, 0, 1,                  \
     1024, 0, GLN_AMAX_ALGO_MAX, 0, 0, 0.0f, GLN_E8M0_ROUND_UP, 1234u, 0.023f,                  \
     {0, 0, 0, 0, 0, 0, 0}, 0, 0}

GLN_API gln_status_t gln_grouped_linear_create(gln_context_t *ctx, const gln_grouped_linear_config_t *cfg,
                                       gln_grouped_linear_t **layer);
GLN_API gln_status_t gln_grouped_linear_destroy(gln_grouped_linear_t *layer);

typedef struct gln_grouped_linear_forward_args {
    size_t size;
    const gln_tensor_t *x;          /* [rows, K_in], activation dtype (NULL with x_quantized) */
    const int64_t *m_splits;        /* [N] */
    int splits_on_backend;          /* split path: must be 0 */
    gln_tensor_t *y;                /* [rows, K_out]; y->data == NULL: the library allocates it
                                       (owned by the saved context, or by the layer when saved
                                       is not requested) and sets y->data */
    gln_microbatch_t microbatch;
    int input_requires_grad;        /* dgrad wanted in backward */
    /* --- version 2 (version 1 ends here: size = GLN_GROUPED_LINEAR_FORWARD_ARGS_V1_SIZE) */
    /* An input that is already quantized (NULL = quantize args->x as usual).  When set, the layer
     * uses these quantized copies instead of quantizing args->x, which may then be NULL (it is
     * ignored, and so is save_original_input: backward never needs the high-precision x).  It
     * must be what gln_grouped_quantize with gln_grouped_linear_input_quant_config() produces:
     *   - packed.scaling and packed.dtype = the config's mode and FP8 format; the scale options
     *     (amax epsilon, power-of-two scales, E8M0 rounding) are the caller's promise — the layer
     *     cannot see them in the bytes;
     *   - the rowwise copy (data, scale_inv), used by fprop;
     *   - the columnwise copy (col_data, col_scale_inv) when backward will run a wgrad: the
     *     layer's weights require grad and `saved` is requested.  An inference forward (saved ==
     *     NULL) never needs it;
     *   - num = N experts, packed.cols = in_features, packed.rows = the call's rows (y's rows;
     *     that of args->x when given), splits equal to args->m_splits (same values; on a CUDA
     *     context with backend-resident splits the same pointer, since the device values cannot
     *     be compared without a synchronization) and splits_on_backend = args->splits_on_backend.
     * Otherwise GLN_STATUS_INVALID_ARGUMENT naming args->x_quantized and the mismatch (an
     * args->x given beside it whose rows differ: naming args->x->rows).  Refused
     * with GLN_STATUS_NOT_SUPPORTED under recipe NONE (nothing to quantize) and FP8_DELAYED (the
     * layer's input amax history would not see this input, so its scales could not follow it).
     * The layer keeps the columnwise copy BY REFERENCE for the wgrad: the caller keeps
     * col_data / col_scale_inv alive and unchanged until backward returns (with
     * delay_wgrad_compute, until the gln_grouped_linear_backward_dw that runs this wgrad) or
     * until the saved context is released; the rowwise copy may be reused once forward returns. */
    const gln_grouped_tensor_t *x_quantized;
} gln_grouped_linear_forward_args_t;
#define GLN_GROUPED_LINEAR_FORWARD_ARGS_V1_SIZE offsetof(gln_grouped_linear_forward_args_t, x_quantized)
#define GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT                                                    \
    {sizeof(gln_grouped_linear_forward_args_t), 0, 0, 0, 0, GLN_MICROBATCH_UNSET, 1, NULL}

/* saved == NULL: inference (nothing kept for backward; under FP8_DELAYED the amaxes are
 * recorded into history row 0 but no scale changes and the window does not roll — TE updates
 * the forward slots only when gradients are enabled).  Otherwise *saved receives a backward
 * context; several may be in flight; each must be released. */
GLN_API gln_status_t gln_grouped_linear_forward(gln_grouped_linear_t *layer,
                                        const gln_grouped_linear_forward_args_t *args,
                                        gln_grouped_linear_saved_t **saved);

/* dy [rows, K_out]; dx [rows, K_in] (NULL: no dgrad; dx->data == NULL: library-allocated,
 * owned by `saved`).  Weight gradients go to main_grad (fused: overwrite on FIRST, else
 * accumulate) or are accumulated into the layer's gradient buffers (gln_grouped_linear_grads;
 * FIRST included); bias gradients are accumulated into the layer's bias-gradient buffers on
 * every backward (FIRST included, also with delay_wgrad_compute: dbias is not delayed).  With
 * delay_wgrad_compute the wgrad is queued for gln_grouped_linear_backward_dw (docs/design.md,
 * "Lifetimes" and "Gradients": what may be reused after the call, how gradients accumulate).  A second
 * backward on one context returns GLN_STATUS_INVALID_STATE.  Every check that can refuse the
 * call (including completing a distributed finalize still in flight and the group's
 * grad_buffer lookups) runs before anything is written: a refused call leaves dx, all
 * gradients and the saved context untouched, so it can be retried. */
/* The quantization config the layer applies to its input x (rowwise = 1; columnwise as asked:
 * 1 for the copy a training forward's wgrad needs), for producing args->x_quantized with
 * gln_grouped_quantize.  out->size must be a known version of gln_quant_config_t (start from
 * GLN_QUANT_CONFIG_INIT); only that many bytes are written.  GLN_STATUS_NOT_SUPPORTED for recipes
 * NONE and FP8_DELAYED (see args->x_quantized). */
GLN_API gln_status_t gln_grouped_linear_input_quant_config(const gln_grouped_linear_t *layer, int columnwise,
                                                           gln_quant_config_t *out);
/* The quantization a layer created from `cfg` applies to its weights (rowwise = 1,
 * columnwise = 0), for creating a sharded group with fp8_gather / quantized_shard before the
 * layer (the layer refuses a group whose fp8_quant differs).  out->size as above.
 * GLN_STATUS_NOT_SUPPORTED for recipe NONE. */
GLN_API gln_status_t gln_grouped_linear_weight_quant_config(const gln_grouped_linear_config_t *cfg,
                                                            gln_quant_config_t *out);

GLN_API gln_status_t gln_grouped_linear_backward(gln_grouped_linear_saved_t *saved, const gln_tensor_t *dy,
                                         gln_tensor_t *dx);
/* Run the oldest queued wgrad (FIFO).  GLN_STATUS_INVALID_STATE when the queue is empty. */
GLN_API gln_status_t gln_grouped_linear_backward_dw(gln_grouped_linear_t *layer);
GLN_API gln_status_t gln_grouped_linear_saved_release(gln_grouped_linear_saved_t *saved);

/* The caller changed the weights (optimizer step): cached quantized weights become stale, so a
 * later NEXT re-quantizes (a safety check: NEXT assumes unchanged weights; FIRST and UNSET
 * always quantize the current weights). */
GLN_API gln_status_t gln_grouped_linear_weights_updated(gln_grouped_linear_t *layer);
/* Parameter and gradient access (backend memory, param dtype; bgrad and a non-fused wgrad in the
 * param dtype, a fused wgrad is the FP32 main_grad). */
GLN_API gln_status_t gln_grouped_linear_weight(gln_grouped_linear_t *layer, int32_t expert, void **weight,
                                       void **bias);
GLN_API gln_status_t gln_grouped_linear_grads(gln_grouped_linear_t *layer, int32_t expert, void **wgrad,
                                      void **bgrad);
/* Zero the layer-owned gradient buffers: non-fused wgrad, bias gradients and a layer-owned
 * main_grad.  A caller-owned main_grad is never touched (FIRST overwrites it), and queued
 * delayed wgrads stay queued. */
GLN_API gln_status_t gln_grouped_linear_zero_grad(gln_grouped_linear_t *layer);
/* Delayed scaling state (amax history [L][slots], scales [slots]) as host pointers; slots per
 * expert i: forward input 3i, weight 3i+1, (output 3i+2, unused); backward grad_output 2i.
 * The state lives in backend memory.  CPU backend: the pointers are the state itself (live;
 * a write changes the scales later quantizations use).  Other backends: host copies owned by
 * the layer, refreshed by this call (which waits for the context's stream), valid until the next
 * call for the same layer and direction or gln_grouped_linear_destroy; writes to them do not
 * reach the layer. */
GLN_API gln_status_t gln_grouped_linear_fp8_state(gln_grouped_linear_t *layer, int backward, float **scale,
                                          float **amax_history, int32_t *num_slots,
                                          int32_t *history_len);
/* Alignment the recipe's GEMMs want per split (the layer pads internally, so any m_i >= 0
 * works; this is the size a caller can pad to for zero padding overhead). */
GLN_API int64_t gln_recipe_alignment(gln_recipe_t recipe);

/* ============================================================================================
 * MoE building blocks: router, token permutation, activations
 * ========================================================================================== */

/* Top-k router on FP32 logits [T, E]: probs = softmax(logits) per token, the k largest
 * (ties → lower expert index) are selected and renormalized to sum to 1 → gates [T, k],
 * experts [T, k] (int32).  Backward maps dgates [T,k] to dlogits [T,E] through the same
 * computation (selection treated as constant). */
GLN_API gln_status_t gln_moe_router_forward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                    const float *logits, int32_t *experts, float *gates);
GLN_API gln_status_t gln_moe_router_backward(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                     const float *logits, const int32_t *experts,
                                     const float *dgates, float *dlogits);

/* Permutation: the T·k (token, slot) pairs are sorted by expert (stable, token order within an
 * expert).  m_splits[E] counts rows per expert; row_of[T·k] gives the permuted row of pair
 * (t, j) at index t·k + j.  permute copies x [T, H] rows into xp [T·k, H] (or more rows: the
 * permuted tensors of every op below may carry an aligned plan's padding rows, never touched). */
GLN_API gln_status_t gln_moe_permute_plan(gln_context_t *ctx, int64_t tokens, int32_t num_experts, int32_t k,
                                  const int32_t *experts, int64_t *m_splits, int64_t *row_of);
/* The same with every expert's block padded to a multiple of `align` rows (1 <= align <= 1024):
 * m_splits[e] = count_e rounded up, expert e's rows start at the sum of the padded blocks before
 * it, and its padding rows end its block (no pair maps to them).  xp then needs
 * T·k + E·(align - 1) rows at most; rows past sum(m_splits) belong to no expert.  The caller
 * keeps the padding rows of xp and of the gradient dyp zero (permute and unpermute_backward
 * never write them), so they add nothing to any GEMM.  Pad to gln_recipe_alignment(recipe) for
 * FP8 recipes: their Hopper wgrad reads the tokens as the K dimension and wants 16-row (MXFP8:
 * 32) multiples per expert — this is TE's / Megatron's FP8 padding, done in the plan. */
GLN_API gln_status_t gln_moe_permute_plan_aligned(gln_context_t *ctx, int64_t tokens, int32_t num_experts,
                                          int32_t k, int64_t align, const int32_t *experts,
                                          int64_t *m_splits, int64_t *row_of);
GLN_API gln_status_t gln_moe_permute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                             const gln_tensor_t *x, gln_tensor_t *xp);
/* Backward of permute: dx[t] = Σ_j dxp[row_of[t·k+j]] (FP32 sum, one rounding). */
GLN_API gln_status_t gln_moe_permute_backward(gln_context_t *ctx, int64_t tokens, int32_t k,
                                      const int64_t *row_of, const gln_tensor_t *dxp, gln_tensor_t *dx);
/* y[t] = Σ_j gates[t,j] · yp[row_of[t·k+j]] (FP32, one rounding). */
GLN_API gln_status_t gln_moe_unpermute(gln_context_t *ctx, int64_t tokens, int32_t k, const int64_t *row_of,
                               const float *gates, const gln_tensor_t *yp, gln_tensor_t *y);
/* dyp[row_of[t·k+j]] = gates[t,j]·dy[t];  dgates[t,j] = <dy[t], yp[row_of[t·k+j]]>. */
GLN_API gln_status_t gln_moe_unpermute_backward(gln_context_t *ctx, int64_t tokens, int32_t k,
                                        const int64_t *row_of, const float *gates,
                                        const gln_tensor_t *yp, const gln_tensor_t *dy,
                                        gln_tensor_t *dyp, float *dgates);

typedef enum gln_activation { GLN_ACT_SWIGLU = 0, GLN_ACT_GELU = 1 } gln_activation_t;
/* SwiGLU: in [R, 2H] = [a | b] → out [R, H] = silu(a)·b.  GELU (tanh form): in [R, H] → [R, H].
 * Computed in FP32, one rounding to out's dtype. */
GLN_API gln_status_t gln_activation_forward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                    gln_tensor_t *out);
GLN_API gln_status_t gln_activation_backward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                     const gln_tensor_t *dout, gln_tensor_t *din);
/* The activation with its output quantized in the same pass: the input of an FP8 FC2 (produce it
 * with gln_grouped_linear_input_quant_config(fc2) and pass it as args->x_quantized), without
 * writing the high-precision activation and reading it back.  in: grouped [rows, 2H] (SwiGLU) or
 * [rows, H] (GELU), high precision; out: grouped quantized [rows, H] with in's num and splits,
 * laid out exactly as gln_grouped_quantize(cfg) lays it out; hp_dtype (fp32 / bf16 / fp16): the
 * dtype the activation's output would be rounded to.  Every byte of out (data, col_data,
 * scale_inv, col_scale_inv, amax, scale; under delayed scaling the max-accumulated amax) equals
 * gln_activation_forward of in's packed rows into an hp_dtype tensor followed by
 * gln_grouped_quantize(cfg) on it, on the same backend.  Arguments as those two calls take them
 * (out->packed.cols = H; the rest of gln_grouped_quantize's checks on the [rows, H] output).
 * The CUDA backend fuses bf16 in and hp_dtype with H % 8 == 0 and a 16-byte aligned input (not
 * per-tensor scaling with amax_nan_propagate = 1); other calls, and the CPU, compose the two
 * operations (docs/design.md). */
GLN_API gln_status_t gln_activation_forward_quantize(gln_context_t *ctx, gln_activation_t act, gln_dtype_t hp_dtype,
                                                     const gln_quant_config_t *cfg, const gln_grouped_tensor_t *in,
                                                     gln_grouped_tensor_t *out);

/* ============================================================================================
 * What a backend supports: ask before calling, fall back instead of failing inside
 * ========================================================================================== */

/* One value per public operation.  The tensor fields of gln_op_query_t mean, per op (fields not
 * listed are ignored):
 *
 *   op                          a (dtype, scaling)      b                out
 *   QUANTIZE, GROUPED_QUANTIZE  in (high precision)     -                out (FP8; scaling = cfg->mode)
 *   DEQUANTIZE                  in (FP8, quantized)     -                out (high precision)
 *   GEMM, GROUPED_GEMM          A (+ layout)            B                D (high precision)
 *   GROUPED_DBIAS               dy                      -                dbias
 *   AMAX                        x                       -                -
 *   CAST                        in                      -                out
 *   MOE_PERMUTE                 x                       -                xp
 *   MOE_PERMUTE_BACKWARD        dxp                     -                dx
 *   MOE_UNPERMUTE               yp                      -                y
 *   MOE_UNPERMUTE_BACKWARD      yp                      dy               dyp
 *   ACTIVATION_FORWARD          in                      -                out
 *   ACTIVATION_BACKWARD         in                      dout             din
 *   ACTIVATION_FORWARD_QUANTIZE in                      hp_dtype         out (FP8; scaling = cfg->mode)
 *                                                       (b_scaling NONE)
 *   MXFP8_SWIZZLE, MOE_ROUTER_*, MOE_PERMUTE_PLAN: no tensor fields (fixed FP32 / integer data).
 * The high-precision fields take fp32 / bf16 / fp16 with GLN_SCALING_NONE; quantized fields an
 * FP8 dtype with a quantized scaling mode; GEMM operands either. */
typedef enum gln_op {
    GLN_OP_QUANTIZE = 0,
    GLN_OP_DEQUANTIZE = 1,
    GLN_OP_GROUPED_QUANTIZE = 2,
    GLN_OP_MXFP8_SWIZZLE = 3,
    GLN_OP_GEMM = 4,
    GLN_OP_GROUPED_GEMM = 5,
    GLN_OP_GROUPED_DBIAS = 6,
    GLN_OP_AMAX = 7,                /* gln_amax and gln_amax_ex */
    GLN_OP_CAST = 8,
    GLN_OP_MOE_ROUTER_FORWARD = 9,
    GLN_OP_MOE_ROUTER_BACKWARD = 10,
    GLN_OP_MOE_PERMUTE_PLAN = 11,
    GLN_OP_MOE_PERMUTE = 12,
    GLN_OP_MOE_PERMUTE_BACKWARD = 13,
    GLN_OP_MOE_UNPERMUTE = 14,
    GLN_OP_MOE_UNPERMUTE_BACKWARD = 15,
    GLN_OP_ACTIVATION_FORWARD = 16,
    GLN_OP_ACTIVATION_BACKWARD = 17,
    GLN_OP_ACTIVATION_FORWARD_QUANTIZE = 18,
    GLN_OP_COUNT_ = 19
} gln_op_t;

typedef struct gln_op_query {
    size_t size;                  /* sizeof(gln_op_query_t) */
    gln_op_t op;
    gln_gemm_layout_t layout;     /* GEMM, GROUPED_GEMM */
    gln_dtype_t a_dtype;
    gln_scaling_mode_t a_scaling;
    gln_dtype_t b_dtype;
    gln_scaling_mode_t b_scaling;
    gln_dtype_t out_dtype;
    gln_scaling_mode_t out_scaling;
} gln_op_query_t;
#define GLN_OP_QUERY_INIT                                                                        \
    {sizeof(gln_op_query_t), GLN_OP_GEMM, GLN_LAYOUT_TN, GLN_DTYPE_BF16, GLN_SCALING_NONE,       \
     GLN_DTYPE_BF16, GLN_SCALING_NONE, GLN_DTYPE_BF16, GLN_SCALING_NONE}

/* *supported = 1 when a call of the queried op with these dtypes, scaling modes and layout
 * (valid, non-empty arguments otherwise) runs on `backend`, 0 when it would return
 * GLN_STATUS_NOT_SUPPORTED: an operation the backend lacks (the MXFP8 scale swizzle on
 * CUDA), a combination it refuses (CUDA GEMMs: high-precision A and B of different
 * dtypes, E5M2 x E5M2 per-tensor FP8), a pair no backend multiplies (a high-precision with a
 * quantized operand, quantized modes of different families), or a backend not compiled into
 * this build (whether a device is present is gln_backend_available's question).  The CPU backend
 * supports every valid combination but those pairs.  (A CUDA GEMM can still be refused by
 * cuBLASLt finding no algorithm for a shape.)  GLN_STATUS_INVALID_ARGUMENT, *supported
 * untouched: a query no call could match (a value outside its enum, a field of the wrong kind
 * for the op, e.g. an FP8 dtype where the op takes high precision). */
GLN_API gln_status_t gln_backend_supports(gln_backend_kind_t backend, const gln_op_query_t *query,
                                          int *supported);

#ifdef __cplusplus
}
#endif
#endif /* GROUPLIN_H */

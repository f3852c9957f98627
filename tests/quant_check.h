/* Helpers shared by the CUDA quantizer tests: inputs, poisoned twin outputs, the CPU reference and
 * the byte-for-byte comparison (quant_check.c).  Compiled only with GLN_TEST_HAVE_CUDA. */
#ifndef GLN_TEST_QUANT_CHECK_H
#define GLN_TEST_QUANT_CHECK_H

#include "device_twin.h" /* every buffer: a host (CPU) and a device (CUDA) twin, poisoned alike */
#include "harness.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <stddef.h>
#include <stdint.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define DATA_POISON 0xA5u
#define SCALE_POISON 0xFFu
#define MAXM 160

extern gln_context_t *g_cu, *g_cpu;  /* the test's contexts (GLN_TEST_CUDA_ONLY_MAIN) */
extern int g_misalign_input;         /* grouped_case: the device input one element past 16 bytes */
extern const gln_dtype_t k_hp[3];    /* fp32, bf16, fp16 */

/* [rows, cols]: N(0, 1) times a per-row power of two (blocks and members get different scales),
 * some rows zero or tiny; with specials, scattered NaN (with payloads; negative ones only with
 * neg_nan), ±Inf, -0, values near the dtype's max, subnormals. */
void *make_input(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols, int specials, int neg_nan);

/* Where a byte lives, for the failure messages. */
typedef struct layout {
    gln_scaling_mode_t mode;
    int32_t num;
    int64_t splits[MAXM];
    int64_t cols;
} layout_t;

enum { BUF_DATA, BUF_COL_DATA, BUF_SCALE, BUF_COL_SCALE, BUF_AMAX, BUF_ENC_SCALE };

typedef struct qout {
    gln_twin_t q, qt, s, cs, amax, scale;
    size_t es; /* bytes of a scale_inv element: 4 (TENSOR), 1 (MXFP8) */
} qout_t;

enum { M_CURRENT, M_DELAYED, M_MX_UP, M_MX_FLOOR, M_COUNT };

typedef struct gcase {
    const gln_quant_config_t *cfg;
    gln_dtype_t dt;
    int32_t num;
    const int64_t *splits;
    int64_t rows, cols; /* packed rows >= Σ splits */
} gcase_t;



void layout_set(layout_t *L, gln_scaling_mode_t mode, int32_t num, const int64_t *splits, int64_t cols);
/* Device bytes of t equal the CPU's (t.h); the first mismatch is described, with the count. */
void twin_check(const gln_twin_t *t, const layout_t *L, int buf, size_t es, const char *what);

/* TENSOR: amax0 / scale0 (num each) are the initial amax / scale values, or NULL for no buffer
 * (current scaling then uses its own scratch). */
qout_t qout_new(const gln_quant_config_t *cfg, size_t nd, size_t ns, size_t ncs, int32_t num, const float *amax0,
                const float *scale0, size_t skew);
gln_tensor_t qout_tensor(const gln_quant_config_t *cfg, qout_t *o, int64_t rows, int64_t cols, int dev);
void qout_check(const qout_t *o, const layout_t *L, const char *what);
void qout_free(qout_t *o);

/* Mode kind m, copies (1 R, 2 C, 3 RC), variant v (0..7): E4M3 / E5M2, NaN rule, and for current
 * scaling power-of-two scales and an amax epsilon. */
gln_quant_config_t make_cfg(int m, int copies, int v);
void cfg_name(const gln_quant_config_t *cfg, gln_dtype_t dt, char *out, size_t n);
/* A negative NaN may meet a NaN MXFP8 decode multiplier (code 0xFF, nan_propagate only); which
 * NaN the host's x86 multiply returns there depends on its compiler's operand order. */
int neg_nan_ok(const gln_quant_config_t *cfg);
/* Initial per-member amax / scale for TENSOR (delayed: awkward scales and prior amaxes; current
 * alternates the caller's buffers with none). */
void tensor_state(const gln_quant_config_t *cfg, int32_t num, int with_buffers, float *amax0, float *scale0,
                  const float **pa, const float **ps);

/* gln_quantize on both backends; skew_in / skew_out misalign the device input / outputs. */
void single_case(const gln_quant_config_t *cfg, gln_dtype_t dt, int64_t rows, int64_t cols, int specials,
                 int with_buffers, size_t skew_in, size_t skew_out, gln_rng_t *rng);

typedef struct splits_set {
    int32_t num;
    const int64_t *splits;
} splits_set_t;
int64_t splits_sum(int32_t num, const int64_t *splits);
void gcase_name(const gcase_t *g, const char *how, char *out, size_t n);
/* Scale buffers sized for any splits of these rows (as a graph-safe caller would). */
void scale_bounds(const gcase_t *g, size_t *ns, size_t *ncs);
/* The CPU's grouped quantize of x.h into o's host twins; the CUDA one (out_splits: out's own copy,
 * NULL: in's). */
void grouped_ref(const gcase_t *g, gln_twin_t *x, qout_t *o);
void grouped_dev(const gcase_t *g, const int64_t *splits, const int64_t *out_splits, int dev_splits, gln_twin_t *x,
                 qout_t *o);
/* how: 0 host splits, 1 device splits, 2 device splits with a separate copy for out. */
void grouped_case(const gcase_t *g, int how, int specials, int with_buffers, gln_rng_t *rng);
/* TENSOR current, TENSOR delayed and MXFP8 grouped quantizes with device splits captured once on a
 * caller's stream; replayed with other splits; each replay equals the CPU. */
void test_graph(void);

#endif /* GLN_TEST_HAVE_CUDA */
#endif

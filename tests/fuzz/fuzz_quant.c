/* Fuzz harness 2: quantized layouts, quantize / dequantize, GEMMs, grouped ops.
 *
 * Each input runs up to three operations chosen by the input.  Promises checked beyond "no
 * memory error, no UB, no leak" (each against an independent derivation, never against the
 * library's own output of the same call):
 *   layout   the byte sizes and scale grids of the table above gln_tensor_t in grouplin.h;
 *            wild shapes are refused
 *   offsets  member scale offsets start at 0 and grow by each member's own layout;
 *            gln_grouped_scale_bound() bounds them for the rows they sum to
 *   quantize current per-tensor scaling writes amax = max |x|; dequantize of a successful
 *            quantize writes finite values from tame data
 *   grouped quantize  = quantize of each member on its own, byte for byte (data and scales)
 *   gemm     high-precision operands with values k/16 in [-8, 8): FP32 accumulation is exact,
 *            so D must equal the exact result rounded once to D's dtype
 *   quantized gemm    operands of any scaling mode: D finite from tame data
 *   grouped gemm      = gln_gemm per member, bit for bit
 *   dbias, amax, cast  exact references */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

enum { MAX_N = 4, MAX_DIM = 40 };

static int64_t dim(fz_t *f, int *wild) {
    int64_t d = fz_size(f, MAX_DIM, wild);
    if (d >= 0 && d <= MAX_DIM && fz_u8(f) >= 0xe8) d += 100; /* across 32 / 128 blocks */
    return d;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t pad(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

static int too_big(int64_t r, int64_t c) {
    int64_t p;
    /* grouplin.h: each dimension in [0, GLN_MAX_DIM], at most GLN_MAX_ELEMS elements */
    return r < 0 || c < 0 || r > GLN_MAX_DIM || c > GLN_MAX_DIM ||
           __builtin_mul_overflow(r, c, &p) || p > GLN_MAX_ELEMS;
}

/* The padded scale grid of grouplin.h's table (rows, cols) for a valid mode and shape. */
static void grid(gln_scaling_mode_t mode, int64_t R, int64_t C, int col, int64_t *gr, int64_t *gc) {
    switch (mode) {
    case GLN_SCALING_TENSOR: *gr = 1, *gc = 1; return;
    case GLN_SCALING_MXFP8_1D:
        if (!col)
            *gr = pad(R, 128), *gc = pad(ceil_div(C, 32), 4);
        else
            *gr = pad(ceil_div(R, 32), 4), *gc = pad(C, 128);
        return;
    case GLN_SCALING_BLOCK_1D:
        if (!col)
            *gr = ceil_div(C, 128), *gc = pad(R, 4);
        else
            *gr = ceil_div(R, 128), *gc = pad(C, 4);
        return;
    case GLN_SCALING_BLOCK_2D:
        if (!col)
            *gr = ceil_div(R, 128), *gc = pad(ceil_div(C, 128), 4);
        else
            *gr = ceil_div(C, 128), *gc = pad(ceil_div(R, 128), 4);
        return;
    default: *gr = 0, *gc = 0; return;
    }
}

static size_t scale_size(gln_scaling_mode_t mode) {
    return mode == GLN_SCALING_NONE ? 0 : mode == GLN_SCALING_MXFP8_1D ? 1 : 4;
}

static int fp8(gln_dtype_t d) { return d == GLN_DTYPE_FP8_E4M3 || d == GLN_DTYPE_FP8_E5M2; }

static void op_layout(fz_t *f) {
    int wild = 0;
    gln_scaling_mode_t mode = (gln_scaling_mode_t)fz_int(f, -1, 5);
    gln_dtype_t dtype = (gln_dtype_t)fz_int(f, -1, 8);
    int64_t rows = fz_size(f, 300, &wild), cols = fz_size(f, 300, &wild);
    gln_quant_layout_t L;
    gln_status_t st = fz_status(gln_quant_layout(mode, dtype, rows, cols, &L), "gln_quant_layout");
    int valid_args = mode >= 0 && mode <= 4 && gln_dtype_size(dtype) != 0 &&
                     (mode == GLN_SCALING_NONE || fp8(dtype));
    if (too_big(rows, cols) || !valid_args) {
        fz_refused(st, "gln_quant_layout", "an invalid mode / dtype / shape");
        return;
    }
    FZ_ASSERT(st == GLN_STATUS_SUCCESS, "gln_quant_layout refused a valid request: %s",
              gln_last_error());
    size_t es = gln_dtype_size(dtype);
    FZ_ASSERT(L.data_bytes == (size_t)(rows * cols) * es, "data_bytes %zu for [%lld, %lld]",
              L.data_bytes, (long long)rows, (long long)cols);
    if (mode == GLN_SCALING_NONE) {
        FZ_ASSERT(L.col_data_bytes == 0 && L.scale_bytes == 0 && L.col_scale_bytes == 0,
                  "scaling none reports scale buffers");
        return;
    }
    FZ_ASSERT(L.col_data_bytes == L.data_bytes, "col_data_bytes %zu != data_bytes %zu",
              L.col_data_bytes, L.data_bytes);
    int64_t gr, gc, cr, cc;
    grid(mode, rows, cols, 0, &gr, &gc);
    grid(mode, rows, cols, 1, &cr, &cc);
    FZ_ASSERT(L.scale_rows == gr && L.scale_cols == gc,
              "mode %d [%lld, %lld]: rowwise grid [%lld, %lld], expected [%lld, %lld]", (int)mode,
              (long long)rows, (long long)cols, (long long)L.scale_rows, (long long)L.scale_cols,
              (long long)gr, (long long)gc);
    FZ_ASSERT(L.col_scale_rows == cr && L.col_scale_cols == cc,
              "mode %d [%lld, %lld]: columnwise grid [%lld, %lld], expected [%lld, %lld]",
              (int)mode, (long long)rows, (long long)cols, (long long)L.col_scale_rows,
              (long long)L.col_scale_cols, (long long)cr, (long long)cc);
    FZ_ASSERT(L.scale_bytes == (size_t)(gr * gc) * scale_size(mode) &&
                  L.col_scale_bytes == (size_t)(cr * cc) * scale_size(mode),
              "scale bytes %zu / %zu do not match the grids", L.scale_bytes, L.col_scale_bytes);
}

static void op_offsets(fz_t *f) {
    int wild = 0;
    gln_scaling_mode_t mode = (gln_scaling_mode_t)fz_int(f, -1, 5);
    int32_t num = (int32_t)fz_int(f, -1, MAX_N);
    int64_t splits[MAX_N + 1] = {0}, cols = fz_size(f, 300, &wild), sum = 0;
    for (int i = 0; i < MAX_N; i++) {
        splits[i] = fz_size(f, 300, &wild);
        if (i < num && splits[i] > 0) sum += splits[i] > GLN_MAX_ELEMS ? GLN_MAX_ELEMS : splits[i];
    }
    int wild_used = cols < 0 || cols > GLN_MAX_ELEMS;
    for (int i = 0; i < num; i++) wild_used |= splits[i] < 0 || splits[i] > 300;
    int64_t ro[MAX_N + 1], co[MAX_N + 1];
    int which = fz_pick(f, 3); /* 0: both, 1: row only, 2: column only */
    gln_status_t st_off =
        fz_status(gln_grouped_scale_offsets(mode, num, splits, cols, which == 2 ? NULL : ro,
                                            which == 1 ? NULL : co),
                  "gln_grouped_scale_offsets");
    int valid = mode >= 0 && mode <= 4 && num >= 1;
    int64_t packed_rows = 0; /* the members as one packed tensor: within the limits too */
    for (int i = 0; i < num && valid; i++) {
        valid = !too_big(splits[i], cols);
        packed_rows += valid ? splits[i] : 0; /* each <= GLN_MAX_DIM, MAX_N of them: no overflow */
    }
    valid = valid && !too_big(packed_rows, cols);
    if (!valid) {
        fz_refused(st_off, "gln_grouped_scale_offsets", "invalid mode / num / splits / cols");
    } else if (!wild_used) {
        FZ_ASSERT(st_off == GLN_STATUS_SUCCESS, "gln_grouped_scale_offsets refused: %s",
                  gln_last_error());
        for (int i = 0; i < num; i++) {
            int64_t gr, gc, cr, cc;
            grid(mode, splits[i], cols, 0, &gr, &gc);
            grid(mode, splits[i], cols, 1, &cr, &cc);
            if (i == 0 && which != 2)
                FZ_ASSERT(ro[0] == 0, "row_offsets[0] = %lld", (long long)ro[0]);
            if (i == 0 && which != 1)
                FZ_ASSERT(co[0] == 0, "col_offsets[0] = %lld", (long long)co[0]);
            if (which != 2)
                FZ_ASSERT(ro[i + 1] - ro[i] == (mode ? gr * gc : 0), "row_offsets step %d", i);
            if (which != 1)
                FZ_ASSERT(co[i + 1] - co[i] == (mode ? cr * cc : 0), "col_offsets step %d", i);
        }
    }
    int64_t rb = -1, cb = -1, rows = sum + fz_int(f, 0, 3);
    if (wild_used && fz_bool(f)) rows = fz_size(f, 300, &wild);
    gln_status_t st = fz_status(gln_grouped_scale_bound(mode, num, rows, cols, &rb, &cb),
                                "gln_grouped_scale_bound");
    if (!(mode >= 0 && mode <= 4 && num >= 1) || too_big(rows, cols) || too_big(1, cols)) {
        fz_refused(st, "gln_grouped_scale_bound", "invalid mode / num / rows / cols");
        return;
    }
    if (st != GLN_STATUS_SUCCESS || st_off != GLN_STATUS_SUCCESS || !valid || wild_used) return;
    FZ_ASSERT(rb >= 0 && cb >= 0, "negative scale bounds %lld / %lld", (long long)rb,
              (long long)cb);
    if (which != 2)
        FZ_ASSERT(ro[num] <= rb, "row offsets %lld exceed the bound %lld", (long long)ro[num],
                  (long long)rb);
    if (which != 1)
        FZ_ASSERT(co[num] <= cb, "col offsets %lld exceed the bound %lld", (long long)co[num],
                  (long long)cb);
}

/* Quantized-tensor buffers for mode / dtype / shape (exact sizes; a copy may be left out). */
static gln_tensor_t quant_buffers(fz_t *f, gln_scaling_mode_t mode, gln_dtype_t dtype, int64_t rows,
                                  int64_t cols, int row, int col, int64_t scale_elems,
                                  int64_t col_scale_elems) {
    gln_tensor_t t = gln_tensor_make(dtype, rows, cols, NULL);
    t.scaling = mode;
    size_t bytes = (size_t)(rows * cols), ss = scale_size(mode);
    if (row) {
        t.data = fz_alloc(f, bytes);
        t.scale_inv = fz_alloc(f, (size_t)scale_elems * ss);
    }
    if (col) {
        t.col_data = fz_alloc(f, bytes);
        t.col_scale_inv = fz_alloc(f, (size_t)col_scale_elems * ss);
    }
    if (t.data && bytes) memset(t.data, 0xA5, bytes);
    if (t.col_data && bytes) memset(t.col_data, 0xA5, bytes);
    if (t.scale_inv && scale_elems) memset(t.scale_inv, 0xA5, (size_t)scale_elems * ss);
    if (t.col_scale_inv && col_scale_elems)
        memset(t.col_scale_inv, 0xA5, (size_t)col_scale_elems * ss);
    if (mode == GLN_SCALING_TENSOR) {
        t.amax = fz_alloc(f, sizeof(float));
        t.scale = fz_alloc(f, sizeof(float));
        if (t.scale) *t.scale = fz_value(f);
        if (t.amax) *t.amax = 0.0f;
    }
    return t;
}

static gln_quant_config_t read_qcfg(fz_t *f) {
    static const float EPS[] = {0.0f, 1e-4f, 1.0f, -1.0f};
    static const gln_dtype_t DT[] = {GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E5M2, GLN_DTYPE_BF16};
    gln_quant_config_t q = GLN_QUANT_CONFIG_INIT;
    q.mode = (gln_scaling_mode_t)fz_int(f, 0, 5);
    q.fp8_dtype = DT[fz_pick(f, 3)];
    uint8_t b = fz_u8(f);
    q.rowwise = b & 1;
    q.columnwise = (b >> 1) & 1;
    q.delayed = (b >> 2) & 1;
    q.power_2_scale = (b >> 3) & 1;
    q.e8m0_rounding = (gln_e8m0_rounding_t)((b >> 4) % 3);
    q.amax_epsilon = EPS[(b >> 6) & 3];
    return q;
}

static gln_dtype_t hp_dtype(fz_t *f) { return (gln_dtype_t)fz_pick(f, 3); }

static void op_quantize(fz_t *f, gln_context_t *ctx) {
    gln_quant_config_t q = read_qcfg(f);
    int wild = 0;
    int64_t rows = dim(f, &wild), cols = dim(f, &wild);
    if (wild) {
        gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, rows, cols, fz_alloc(f, 16));
        gln_tensor_t out = quant_buffers(f, q.mode, q.fp8_dtype, 0, 0, 1, 1, 4, 4);
        out.rows = rows, out.cols = cols;
        if (too_big(rows, cols))
            fz_refused(gln_quantize(ctx, &q, &in, &out), "gln_quantize", "a wild shape");
        return;
    }
    gln_tensor_t in = fz_tensor(f, hp_dtype(f), rows, cols);
    gln_quant_layout_t L;
    if (gln_quant_layout(q.mode, q.fp8_dtype, rows, cols, &L) != GLN_STATUS_SUCCESS) {
        gln_tensor_t out =
            quant_buffers(f, GLN_SCALING_TENSOR, GLN_DTYPE_FP8_E4M3, rows, cols, 1, 1, 1, 1);
        out.scaling = q.mode;
        out.dtype = q.fp8_dtype;
        fz_refused(gln_quantize(ctx, &q, &in, &out), "gln_quantize", "an invalid mode / dtype");
        return;
    }
    /* Buffers for the requested copies (rarely one left out), sometimes for the others too. */
    int row = q.rowwise ? fz_u8(f) != 0 : fz_u8(f) == 0;
    int col = q.columnwise ? fz_u8(f) != 0 : fz_u8(f) == 0;
    gln_tensor_t out =
        quant_buffers(f, q.mode, q.fp8_dtype, rows, cols, row, col, L.scale_rows * L.scale_cols,
                      L.col_scale_rows * L.col_scale_cols);
    gln_status_t st = fz_status(gln_quantize(ctx, &q, &in, &out), "gln_quantize");
    if (st != GLN_STATUS_SUCCESS) return;
    size_t count = (size_t)(rows * cols);
    if (q.mode == GLN_SCALING_TENSOR && !q.delayed && !f->specials && count) {
        float m = 0.0f;
        for (size_t i = 0; i < count; i++) m = fmaxf(m, fabsf(fz_load(in.data, in.dtype, i)));
        FZ_ASSERT(out.amax && *out.amax == m, "current scaling: amax %g, expected max|x| = %g",
                  out.amax ? (double)*out.amax : -1.0, (double)m);
    }
    for (int c = 0; c < 2; c++) {
        if (!(c ? q.columnwise : q.rowwise)) continue;
        gln_tensor_t d = fz_tensor_poisoned(f, hp_dtype(f), rows, cols);
        st = fz_status(gln_dequantize(ctx, &out, c, &d), "gln_dequantize");
        FZ_ASSERT(st == GLN_STATUS_SUCCESS,
                  "dequantize of a successful quantize (copy %d) failed: %s", c, gln_last_error());
        if (!f->specials && !(q.delayed && q.mode == GLN_SCALING_TENSOR))
            FZ_ASSERT(fz_all_finite(d.data, d.dtype, count), "dequantized copy %d is not finite",
                      c);
    }
}

/* Grouped quantize of N members = quantize of each member alone (same bytes). */
static void op_grouped_quantize(fz_t *f, gln_context_t *ctx) {
    gln_quant_config_t q = read_qcfg(f);
    int wild = 0, num = (int)fz_int(f, 1, MAX_N);
    int64_t splits[MAX_N], cols = dim(f, &wild), sum = 0;
    for (int i = 0; i < num; i++) sum += splits[i] = fz_int(f, 0, 24);
    if (wild || q.mode == GLN_SCALING_NONE || q.mode > GLN_SCALING_BLOCK_2D || !fp8(q.fp8_dtype))
        return;
    q.rowwise |= !q.columnwise;
    int64_t ro[MAX_N + 1], co[MAX_N + 1];
    FZ_ASSERT(gln_grouped_scale_offsets(q.mode, num, splits, cols, ro, co) == GLN_STATUS_SUCCESS,
              "offsets: %s", gln_last_error());
    gln_dtype_t idt = hp_dtype(f);
    gln_tensor_t packed = fz_tensor(f, idt, sum, cols);
    gln_grouped_tensor_t in = {num, splits, 0, packed};
    gln_grouped_tensor_t out = {num, splits, 0,
                                quant_buffers(f, q.mode, q.fp8_dtype, sum, cols, q.rowwise,
                                              q.columnwise, ro[num], co[num])};
    int per_tensor = q.mode == GLN_SCALING_TENSOR;
    if (per_tensor) { /* N scales / amaxes / scale_invs */
        out.packed.amax = fz_alloc(f, num * sizeof(float));
        out.packed.scale = fz_alloc(f, num * sizeof(float));
        if (q.rowwise) out.packed.scale_inv = fz_alloc(f, num * sizeof(float));
        if (q.columnwise) out.packed.col_scale_inv = fz_alloc(f, num * sizeof(float));
        for (int i = 0; i < num; i++) out.packed.amax[i] = 0.0f, out.packed.scale[i] = 1.0f + i;
    }
    if (fz_status(gln_grouped_quantize(ctx, &q, &in, &out), "gln_grouped_quantize") !=
        GLN_STATUS_SUCCESS)
        return;
    size_t ss = scale_size(q.mode);
    int64_t row0 = 0;
    for (int i = 0; i < num; i++) {
        gln_quant_layout_t L;
        FZ_ASSERT(gln_quant_layout(q.mode, q.fp8_dtype, splits[i], cols, &L) == GLN_STATUS_SUCCESS,
                  "layout");
        gln_tensor_t mi = gln_tensor_make(
            idt, splits[i], cols,
            packed.data ? (char *)packed.data + (size_t)(row0 * cols) * gln_dtype_size(idt) : NULL);
        gln_tensor_t mo =
            quant_buffers(f, q.mode, q.fp8_dtype, splits[i], cols, q.rowwise, q.columnwise,
                          L.scale_rows * L.scale_cols, L.col_scale_rows * L.col_scale_cols);
        if (per_tensor && mo.scale) *mo.scale = 1.0f + i;
        if (fz_status(gln_quantize(ctx, &q, &mi, &mo), "gln_quantize (member)") !=
            GLN_STATUS_SUCCESS)
            fz_fail("member %d: grouped quantize succeeded, quantize alone failed: %s", i,
                    gln_last_error());
        size_t db = (size_t)(splits[i] * cols);
        size_t off = (size_t)(row0 * cols);
        if (q.rowwise && db)
            FZ_ASSERT(memcmp((char *)out.packed.data + off, mo.data, db) == 0,
                      "member %d: rowwise data differs", i);
        if (q.columnwise && db)
            FZ_ASSERT(memcmp((char *)out.packed.col_data + off, mo.col_data, db) == 0,
                      "member %d: columnwise data differs", i);
        if (per_tensor) {
            if (q.rowwise)
                FZ_ASSERT(memcmp(&((float *)out.packed.scale_inv)[i], mo.scale_inv, 4) == 0,
                          "member %d: scale_inv differs", i);
            if (!q.delayed)
                FZ_ASSERT(memcmp(&out.packed.amax[i], mo.amax, 4) == 0, "member %d: amax differs",
                          i);
        } else {
            size_t rs = (size_t)(ro[i + 1] - ro[i]) * ss, cs = (size_t)(co[i + 1] - co[i]) * ss;
            if (q.rowwise && rs && db)
                FZ_ASSERT(memcmp((char *)out.packed.scale_inv + ro[i] * ss, mo.scale_inv, rs) == 0,
                          "member %d: rowwise scales differ", i);
            if (q.columnwise && cs && db)
                FZ_ASSERT(memcmp((char *)out.packed.col_scale_inv + co[i] * ss, mo.col_scale_inv,
                                 cs) == 0,
                          "member %d: columnwise scales differ", i);
        }
        row0 += splits[i];
    }
}

/* Exact reference of a high-precision GEMM (fp32 accumulation is exact on these values). */
static void op_gemm(fz_t *f, gln_context_t *ctx) {
    gln_gemm_layout_t layout = (gln_gemm_layout_t)fz_int(f, 0, 3);
    int wild = 0;
    int64_t m = dim(f, &wild), n = dim(f, &wild), k = dim(f, &wild);
    if (wild) return;
    gln_dtype_t ad = hp_dtype(f), bd = hp_dtype(f), dd = hp_dtype(f);
    int use_bias = fz_bool(f), acc = fz_bool(f);
    /* Row-major shapes per layout (grouplin.h): TN D[m,n] = B[m,k]·A[n,k]ᵀ; NN D[m,n] =
     * B[m,k]·A[k,n]; NT D[n,k] = B[m,n]ᵀ·A[m,k]. */
    int64_t ar, ac, br, bc, dr, dc;
    switch (layout) {
    case GLN_LAYOUT_TN: ar = n, ac = k, br = m, bc = k, dr = m, dc = n; break;
    case GLN_LAYOUT_NN: ar = k, ac = n, br = m, bc = k, dr = m, dc = n; break;
    default: ar = m, ac = k, br = m, bc = n, dr = n, dc = k; break;
    }
    if (fz_u8(f) == 0xff) bc += 1; /* a shape mismatch: refused */
    gln_tensor_t A = fz_tensor(f, ad, ar, ac), B = fz_tensor(f, bd, br, bc);
    gln_tensor_t D = fz_tensor(f, dd, dr, dc), bias = fz_tensor(f, dd, 1, dc);
    size_t dn = (size_t)(dr * dc);
    float *d0 = fz_alloc(f, dn * sizeof(float));
    for (size_t i = 0; i < dn; i++) d0[i] = fz_load(D.data, dd, i);
    gln_status_t st =
        fz_status(gln_gemm(ctx, layout, &A, &B, &D, use_bias ? &bias : NULL, acc), "gln_gemm");
    if (layout > GLN_LAYOUT_NT || bc != (layout == GLN_LAYOUT_NT ? n : k)) {
        fz_refused(st, "gln_gemm", "an invalid layout or mismatched shapes");
        return;
    }
    FZ_ASSERT(st == GLN_STATUS_SUCCESS, "gln_gemm refused valid operands: %s", gln_last_error());
    if (f->specials) return;
    for (int64_t i = 0; i < dr; i++)
        for (int64_t j = 0; j < dc; j++) {
            double s = 0.0;
            int64_t red = layout == GLN_LAYOUT_NT ? m : k;
            for (int64_t r = 0; r < red; r++) {
                double a, b;
                if (layout == GLN_LAYOUT_TN)
                    a = fz_load(A.data, ad, (size_t)(j * k + r)),
                    b = fz_load(B.data, bd, (size_t)(i * k + r));
                else if (layout == GLN_LAYOUT_NN)
                    a = fz_load(A.data, ad, (size_t)(r * n + j)),
                    b = fz_load(B.data, bd, (size_t)(i * k + r));
                else
                    a = fz_load(A.data, ad, (size_t)(r * k + j)),
                    b = fz_load(B.data, bd, (size_t)(r * n + i));
                s += a * b;
            }
            if (use_bias) s += fz_load(bias.data, dd, (size_t)j);
            if (acc) s += d0[i * dc + j];
            uint32_t w = 0; /* the exact value rounded once to D's dtype */
            fz_store(&w, dd, 0, (float)s);
            float want = fz_load(&w, dd, 0);
            float got = fz_load(D.data, dd, (size_t)(i * dc + j));
            FZ_ASSERT(got == want, "gemm layout %d D[%lld,%lld] = %.9g, exact %.9g (rounded %.9g)",
                      (int)layout, (long long)i, (long long)j, (double)got, s, (double)want);
        }
}

/* A high-precision tensor quantized with both copies (returns 0 when the quantizer refused). */
static int quantized(fz_t *f, gln_context_t *ctx, const gln_quant_config_t *q, int64_t rows,
                     int64_t cols, gln_tensor_t *out) {
    gln_quant_layout_t L;
    if (gln_quant_layout(q->mode, q->fp8_dtype, rows, cols, &L) != GLN_STATUS_SUCCESS) return 0;
    gln_tensor_t in = fz_tensor(f, hp_dtype(f), rows, cols);
    *out = quant_buffers(f, q->mode, q->fp8_dtype, rows, cols, 1, 1, L.scale_rows * L.scale_cols,
                         L.col_scale_rows * L.col_scale_cols);
    return fz_status(gln_quantize(ctx, q, &in, out), "gln_quantize (gemm operand)") ==
           GLN_STATUS_SUCCESS;
}

/* GEMMs on quantized operands (any mode, mixed with high precision): finite from tame data. */
static void op_quant_gemm(fz_t *f, gln_context_t *ctx) {
    gln_gemm_layout_t layout = (gln_gemm_layout_t)fz_int(f, 0, 2);
    int wild = 0;
    int64_t m = dim(f, &wild), n = dim(f, &wild), k = dim(f, &wild);
    if (wild) return;
    gln_quant_config_t qa = read_qcfg(f), qb = read_qcfg(f);
    qa.rowwise = qa.columnwise = qb.rowwise = qb.columnwise = 1;
    qa.delayed = qb.delayed = 0;
    int64_t ar, ac, br, bc, dr, dc;
    switch (layout) {
    case GLN_LAYOUT_TN: ar = n, ac = k, br = m, bc = k, dr = m, dc = n; break;
    case GLN_LAYOUT_NN: ar = k, ac = n, br = m, bc = k, dr = m, dc = n; break;
    default: ar = m, ac = k, br = m, bc = n, dr = n, dc = k; break;
    }
    gln_tensor_t A, B;
    if (fz_bool(f))
        A = fz_tensor(f, hp_dtype(f), ar, ac);
    else if (!quantized(f, ctx, &qa, ar, ac, &A))
        return;
    if (fz_bool(f))
        B = fz_tensor(f, hp_dtype(f), br, bc);
    else if (!quantized(f, ctx, &qb, br, bc, &B))
        return;
    gln_tensor_t D = fz_tensor_poisoned(f, hp_dtype(f), dr, dc);
    if (fz_status(gln_gemm(ctx, layout, &A, &B, &D, NULL, 0), "gln_gemm (quantized)") ==
            GLN_STATUS_SUCCESS &&
        !f->specials)
        FZ_ASSERT(fz_all_finite(D.data, D.dtype, (size_t)(dr * dc)),
                  "quantized gemm: D not finite");
}

/* Grouped GEMM = gln_gemm per member (high precision), and grouped dbias = exact sums. */
static void op_grouped_gemm(fz_t *f, gln_context_t *ctx) {
    gln_gemm_layout_t layout = (gln_gemm_layout_t)fz_int(f, 0, 2);
    int num = (int)fz_int(f, 1, MAX_N), wild = 0;
    int64_t splits[MAX_N], sum = 0, kin = dim(f, &wild), kout = dim(f, &wild);
    if (wild) return;
    for (int i = 0; i < num; i++) sum += splits[i] = fz_int(f, 0, 24);
    int64_t rows = sum + fz_int(f, 0, 2);
    gln_dtype_t dt = hp_dtype(f);
    int acc = fz_bool(f), use_bias = fz_bool(f) && layout == GLN_LAYOUT_TN;
    gln_tensor_t A[MAX_N], bias[MAX_N], Dl[MAX_N], Dref[MAX_N];
    gln_grouped_gemm_args_t g = GLN_GROUPED_GEMM_ARGS_INIT;
    g.layout = layout;
    g.accumulate = acc;
    /* TN: x [rows, kin] -> y [rows, kout]; NN: dy [rows, kout] -> dx [rows, kin];
     * NT: x [rows, kin], dy [rows, kout] -> dW [kout, kin]. */
    int64_t bcols = layout == GLN_LAYOUT_TN ? kin : kout,
            dcols = layout == GLN_LAYOUT_NN ? kin : kout;
    gln_grouped_tensor_t B = {num, splits, 0,
                              fz_tensor(f, dt, rows, layout == GLN_LAYOUT_NT ? kout : bcols)};
    gln_grouped_tensor_t Ag = {num, splits, 0, fz_tensor(f, dt, rows, kin)};
    gln_grouped_tensor_t D = {num, splits, 0, fz_tensor(f, dt, rows, dcols)};
    gln_tensor_t D0 = fz_tensor(f, dt, rows, dcols);
    size_t es = gln_dtype_size(dt), dbytes = (size_t)(rows * dcols) * es;
    if (dbytes) memcpy(D0.data, D.packed.data, dbytes);
    for (int i = 0; i < num; i++) {
        A[i] = fz_tensor(f, dt, kout, kin); /* W_i [kout, kin] for TN and NN */
        bias[i] = fz_tensor(f, dt, 1, kout);
        Dl[i] = fz_tensor(f, dt, kout, kin);
        Dref[i] = fz_tensor(f, dt, kout, kin);
        if (kout * kin > 0) memcpy(Dref[i].data, Dl[i].data, (size_t)(kout * kin) * es);
    }
    if (layout == GLN_LAYOUT_NT) {
        g.a_grouped = &Ag;
        g.d_list = Dl;
    } else {
        g.a_list = A;
        g.d_grouped = &D;
        if (use_bias) g.bias_list = bias;
    }
    g.b = &B;
    if (fz_status(gln_grouped_gemm(ctx, &g), "gln_grouped_gemm") != GLN_STATUS_SUCCESS) return;
    int64_t row0 = 0;
    for (int i = 0; i < num; i++) {
        char *bp =
            B.packed.data ? (char *)B.packed.data + (size_t)(row0 * B.packed.cols) * es : NULL;
        gln_tensor_t Bi = gln_tensor_make(dt, splits[i], B.packed.cols, bp);
        if (layout == GLN_LAYOUT_NT) {
            char *ap = Ag.packed.data ? (char *)Ag.packed.data + (size_t)(row0 * kin) * es : NULL;
            gln_tensor_t Ai = gln_tensor_make(dt, splits[i], kin, ap);
            if (splits[i] == 0 && !acc) {
                for (int64_t e = 0; e < kout * kin; e++)
                    FZ_ASSERT(fz_load(Dl[i].data, dt, (size_t)e) == 0.0f,
                              "NT member %d empty: not zeroed", i);
            } else if (splits[i] > 0) {
                FZ_ASSERT(gln_gemm(ctx, GLN_LAYOUT_NT, &Ai, &Bi, &Dref[i], NULL, acc) ==
                              GLN_STATUS_SUCCESS,
                          "member gemm: %s", gln_last_error());
                FZ_ASSERT(kout * kin == 0 ||
                              memcmp(Dref[i].data, Dl[i].data, (size_t)(kout * kin) * es) == 0,
                          "NT member %d differs from gln_gemm", i);
            }
        } else if (splits[i] > 0 && dcols > 0) {
            char *dp = (char *)D0.data + (size_t)(row0 * dcols) * es;
            gln_tensor_t Di = gln_tensor_make(dt, splits[i], dcols, dp);
            FZ_ASSERT(gln_gemm(ctx, layout, &A[i], &Bi, &Di, use_bias ? &bias[i] : NULL, acc) ==
                          GLN_STATUS_SUCCESS,
                      "member gemm: %s", gln_last_error());
            FZ_ASSERT(memcmp(dp, (char *)D.packed.data + (size_t)(row0 * dcols) * es,
                             (size_t)(splits[i] * dcols) * es) == 0,
                      "layout %d member %d differs from gln_gemm", (int)layout, i);
        }
        row0 += splits[i];
    }
    /* dbias over the same grouped B: exact column sums. */
    gln_tensor_t db[MAX_N];
    for (int i = 0; i < num; i++) db[i] = fz_tensor(f, dt, 1, B.packed.cols);
    float prev[MAX_N][200];
    for (int i = 0; i < num; i++)
        for (int64_t j = 0; j < B.packed.cols; j++) prev[i][j] = fz_load(db[i].data, dt, (size_t)j);
    if (fz_status(gln_grouped_dbias(ctx, &B, db, acc), "gln_grouped_dbias") != GLN_STATUS_SUCCESS ||
        f->specials)
        return;
    row0 = 0;
    for (int i = 0; i < num; i++) {
        for (int64_t j = 0; j < B.packed.cols; j++) {
            double s = acc ? prev[i][j] : 0.0;
            for (int64_t r = row0; r < row0 + splits[i]; r++)
                s += fz_load(B.packed.data, dt, (size_t)(r * B.packed.cols + j));
            uint32_t w = 0;
            fz_store(&w, dt, 0, (float)s);
            FZ_ASSERT(fz_load(db[i].data, dt, (size_t)j) == fz_load(&w, dt, 0),
                      "dbias member %d col %lld: %g, exact %g", i, (long long)j,
                      (double)fz_load(db[i].data, dt, (size_t)j), s);
        }
        row0 += splits[i];
    }
}

static void op_amax_cast(fz_t *f, gln_context_t *ctx) {
    int wild = 0;
    int64_t rows = dim(f, &wild), cols = dim(f, &wild);
    if (wild) {
        float a;
        gln_tensor_t t = gln_tensor_make(GLN_DTYPE_FP32, rows, cols, fz_alloc(f, 16));
        if (too_big(rows, cols)) fz_refused(gln_amax(ctx, &t, &a), "gln_amax", "a wild shape");
        return;
    }
    gln_tensor_t x = fz_tensor(f, hp_dtype(f), rows, cols);
    size_t count = (size_t)(rows * cols);
    float a = -1.0f, want = 0.0f;
    for (size_t i = 0; i < count; i++) {
        float v = fabsf(fz_load(x.data, x.dtype, i));
        if (v > want) want = v; /* NaN ignored */
    }
    if (fz_status(gln_amax(ctx, &x, &a), "gln_amax") == GLN_STATUS_SUCCESS)
        FZ_ASSERT(a == want, "amax %g, expected %g", (double)a, (double)want);
    gln_tensor_t y = fz_tensor_poisoned(f, hp_dtype(f), rows, cols);
    if (fz_status(gln_cast(ctx, &x, &y), "gln_cast") != GLN_STATUS_SUCCESS) return;
    for (size_t i = 0; i < count; i++) {
        uint32_t w = 0;
        fz_store(&w, y.dtype, 0, fz_load(x.data, x.dtype, i));
        size_t es = gln_dtype_size(y.dtype);
        FZ_ASSERT(memcmp((char *)y.data + i * es, &w, es) == 0, "cast element %zu differs", i);
    }
}

static void op_swizzle(fz_t *f, gln_context_t *ctx) {
    int wild = 0, col = fz_bool(f);
    int64_t rows = dim(f, &wild), cols = dim(f, &wild);
    if (wild) {
        uint8_t a[16], b[16];
        if (too_big(rows, cols))
            fz_refused(gln_mxfp8_swizzle_scales(ctx, rows, cols, col, a, b),
                       "gln_mxfp8_swizzle_scales", "a wild shape");
        return;
    }
    gln_quant_layout_t L;
    FZ_ASSERT(gln_quant_layout(GLN_SCALING_MXFP8_1D, GLN_DTYPE_FP8_E4M3, rows, cols, &L) ==
                  GLN_STATUS_SUCCESS,
              "layout");
    size_t bytes = col ? L.col_scale_bytes : L.scale_bytes;
    uint8_t *in = fz_alloc(f, bytes), *out = fz_alloc(f, bytes);
    for (size_t i = 0; i < bytes; i++) in[i] = fz_u8(f);
    fz_status(gln_mxfp8_swizzle_scales(ctx, rows, cols, col, in, out), "gln_mxfp8_swizzle_scales");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_t f = fz_begin(data, size);
    gln_context_t *ctx = fz_context();
    int ops = 1 + fz_pick(&f, 3);
    for (int o = 0; o < ops; o++) {
        switch (fz_pick(&f, 9)) {
        case 0: op_layout(&f); break;
        case 1: op_offsets(&f); break;
        case 2: op_quantize(&f, ctx); break;
        case 3: op_grouped_quantize(&f, ctx); break;
        case 4: op_gemm(&f, ctx); break;
        case 5: op_grouped_gemm(&f, ctx); break;
        case 6: op_amax_cast(&f, ctx); break;
        case 7: op_swizzle(&f, ctx); break;
        default: op_quant_gemm(&f, ctx); break;
        }
        fz_free_all();
    }
    return 0;
}

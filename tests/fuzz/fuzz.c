/* The byte reader, buffers and checks shared by the harnesses (see fuzz.h). */
#include "fuzz.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sanitizer defaults for every harness (the environment can still override them): a request
 * past 256 MiB returns NULL instead of reporting, so the library's OUT_OF_MEMORY paths run and
 * no input can make the machine page; the first error is fatal. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1:max_allocation_size_mb=256:abort_on_error=1:"
           "detect_leaks=1";
}
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "print_stacktrace=1:halt_on_error=1"; }

static int wild_allowed(void) {
    static int cached = -1;
    if (cached < 0) {
        const char *e = getenv("GLN_FUZZ_NO_WILD");
        cached = !(e && e[0] && strcmp(e, "0") != 0);
    }
    return cached;
}

fz_t fz_begin(const uint8_t *data, size_t size) {
    fz_t f = {data, size, 0, wild_allowed(), 0};
    uint8_t flags = fz_u8(&f);
    f.specials = (flags & 0x80) != 0;
    if (!(flags & 0x40)) f.wild = 0; /* most inputs are tame: wild ones are the minority */
    return f;
}

uint8_t fz_u8(fz_t *f) { return f->i < f->n ? f->p[f->i++] : 0; }

uint32_t fz_u32(fz_t *f) {
    uint32_t v = 0;
    for (int b = 0; b < 4; b++) v |= (uint32_t)fz_u8(f) << (8 * b);
    return v;
}

uint64_t fz_u64(fz_t *f) {
    uint64_t lo = fz_u32(f);
    return lo | (uint64_t)fz_u32(f) << 32;
}

int fz_bool(fz_t *f) { return fz_u8(f) & 1; }

int64_t fz_int(fz_t *f, int64_t lo, int64_t hi) {
    uint64_t span = (uint64_t)(hi - lo) + 1;
    uint64_t v = span <= 256 ? fz_u8(f) : fz_u32(f);
    return lo + (int64_t)(v % span);
}

int fz_pick(fz_t *f, int n) { return (int)(fz_u8(f) % (unsigned)n); }

static const int64_t WILD[] = {
    -1,
    -2,
    -((int64_t)1 << 62),
    INT64_MIN,
    (int64_t)1 << 31,
    ((int64_t)1 << 32) + 3,
    (int64_t)1 << 56,
    ((int64_t)1 << 56) + 1,
    (int64_t)1 << 62,
    ((int64_t)1 << 62) + 1,
    INT64_MAX,
    INT64_MAX / 3,
};

int64_t fz_size(fz_t *f, int64_t max, int *wild) {
    uint8_t sel = fz_u8(f);
    /* 1 in 16 draws is wild (when allowed); the rest are uniform in [0, max]. */
    if (f->wild && (sel & 0x0f) == 0x0f) {
        int64_t v = WILD[(sel >> 4) % (sizeof WILD / sizeof WILD[0])];
        if (wild && (v < 0 || v > max)) *wild = 1;
        return v;
    }
    return (int64_t)(fz_u8(f) % (uint64_t)(max + 1));
}

float fz_value(fz_t *f) {
    uint8_t b = fz_u8(f);
    if (f->specials && b >= 0xf8) {
        static const float S[8] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 65504.0f, 1e30f, 1e-40f};
        return S[b - 0xf8];
    }
    return (float)((int)b - 128) / 16.0f;
}

/* ---- context ------------------------------------------------------------------------------ */

static gln_context_t *g_ctx;

static void destroy_context(void) {
    gln_context_destroy(g_ctx);
    g_ctx = NULL;
}

gln_context_t *fz_context(void) {
    if (g_ctx) return g_ctx;
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.num_threads = 1;
    if (gln_context_create(&o, &g_ctx) != GLN_STATUS_SUCCESS)
        fz_fail("gln_context_create failed: %s", gln_last_error());
    atexit(destroy_context);
    return g_ctx;
}

/* ---- buffers ------------------------------------------------------------------------------ */

enum { FZ_MAX_BUFFERS = 256 };
static void *g_bufs[FZ_MAX_BUFFERS];
static int g_nbufs;

void *fz_alloc(fz_t *f, size_t bytes) {
    if (bytes == 0 && fz_bool(f)) return NULL;
    FZ_ASSERT(g_nbufs < FZ_MAX_BUFFERS, "harness: more than %d buffers in one input",
              FZ_MAX_BUFFERS);
    void *p = malloc(bytes ? bytes : 1);
    FZ_ASSERT(p != NULL, "harness: malloc(%zu) failed", bytes);
    g_bufs[g_nbufs++] = p;
    return p;
}

void fz_free_all(void) {
    for (int i = 0; i < g_nbufs; i++) free(g_bufs[i]);
    g_nbufs = 0;
}

float fz_load(const void *data, gln_dtype_t dtype, size_t i) {
    switch (dtype) {
    case GLN_DTYPE_FP32: return ((const float *)data)[i];
    case GLN_DTYPE_BF16: return gln_bf16_to_fp32(((const uint16_t *)data)[i]);
    case GLN_DTYPE_FP16: return gln_fp16_to_fp32(((const uint16_t *)data)[i]);
    default: fz_fail("harness: fz_load of dtype %s", gln_dtype_name(dtype));
    }
}

void fz_store(void *data, gln_dtype_t dtype, size_t i, float v) {
    switch (dtype) {
    case GLN_DTYPE_FP32: ((float *)data)[i] = v; return;
    case GLN_DTYPE_BF16: ((uint16_t *)data)[i] = gln_fp32_to_bf16(v); return;
    case GLN_DTYPE_FP16: ((uint16_t *)data)[i] = gln_fp32_to_fp16(v); return;
    default: fz_fail("harness: fz_store of dtype %s", gln_dtype_name(dtype));
    }
}

static int is_high_precision(gln_dtype_t dtype) {
    return dtype == GLN_DTYPE_FP32 || dtype == GLN_DTYPE_BF16 || dtype == GLN_DTYPE_FP16;
}

gln_tensor_t fz_tensor(fz_t *f, gln_dtype_t dtype, int64_t rows, int64_t cols) {
    size_t count = (size_t)rows * (size_t)cols;
    void *data = fz_alloc(f, count * gln_dtype_size(dtype));
    if (is_high_precision(dtype))
        for (size_t i = 0; i < count; i++) fz_store(data, dtype, i, fz_value(f));
    else if (count)
        for (size_t i = 0; i < count * gln_dtype_size(dtype); i++) ((uint8_t *)data)[i] = fz_u8(f);
    return gln_tensor_make(dtype, rows, cols, data);
}

gln_tensor_t fz_tensor_poisoned(fz_t *f, gln_dtype_t dtype, int64_t rows, int64_t cols) {
    size_t count = (size_t)rows * (size_t)cols;
    void *data = fz_alloc(f, count * gln_dtype_size(dtype));
    if (is_high_precision(dtype))
        for (size_t i = 0; i < count; i++) fz_store(data, dtype, i, NAN);
    else if (count)
        memset(data, 0xA5, count * gln_dtype_size(dtype));
    return gln_tensor_make(dtype, rows, cols, data);
}

int fz_all_finite(const void *data, gln_dtype_t dtype, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (!isfinite(fz_load(data, dtype, i))) return 0;
    return 1;
}

int fz_no_nan(const void *data, gln_dtype_t dtype, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (isnan(fz_load(data, dtype, i))) return 0;
    return 1;
}

/* ---- checks ------------------------------------------------------------------------------- */

void fz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz: broken promise: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    abort();
}

/* GLN_FUZZ_VERBOSE=1: print every checked call's status (to read what an input does). */
static int verbose(void) {
    static int cached = -1;
    if (cached < 0) {
        const char *e = getenv("GLN_FUZZ_VERBOSE");
        cached = e && e[0] && strcmp(e, "0") != 0;
    }
    return cached;
}

gln_status_t fz_status(gln_status_t st, const char *call) {
    if (verbose())
        fprintf(stderr, "fuzz: %s -> %s%s%s\n", call, gln_status_string(st), st ? ": " : "",
                st ? gln_last_error() : "");
    if (st == GLN_STATUS_SUCCESS) return st;
    FZ_ASSERT(st > GLN_STATUS_SUCCESS && st <= GLN_STATUS_INTERNAL_ERROR,
              "%s returned %d, not a gln_status_t", call, (int)st);
    FZ_ASSERT(st != GLN_STATUS_INTERNAL_ERROR, "%s: internal error: %s", call, gln_last_error());
    const char *msg = gln_last_error();
    FZ_ASSERT(msg && msg[0], "%s failed (%s) with an empty gln_last_error()", call,
              gln_status_string(st));
    return st;
}

void fz_refused(gln_status_t st, const char *call, const char *why) {
    fz_status(st, call);
    FZ_ASSERT(st != GLN_STATUS_SUCCESS, "%s succeeded on %s", call, why);
}

#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static const char *current_case = "";

void gln_test_fail_at(const char *file, int line, const char *fmt, ...) {
    failures++;
    fprintf(stderr, "FAIL [%s] %s:%d: ", current_case, file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int gln_test_failures(void) { return failures; }

int gln_test_main(int argc, char **argv, const gln_test_case_t *cases, size_t count) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    size_t ran = 0;
    for (size_t i = 0; i < count; i++) {
        if (filter && !strstr(cases[i].name, filter)) continue;
        int before = failures;
        current_case = cases[i].name;
        gln_clear_error();
        cases[i].fn();
        ran++;
        printf("%-60s %s\n", cases[i].name, failures == before ? "ok" : "FAILED");
        fflush(stdout);
    }
    if (ran == 0) {
        fprintf(stderr, "no test case matched '%s'\n", filter ? filter : "");
        return 2;
    }
    printf("%zu cases, %d failed checks\n", ran, failures);
    return failures == 0 ? 0 : 1;
}

void gln_test_check_status(gln_status_t got, gln_status_t want, const char *needle, const char *expr,
                           const char *file, int line) {
    if (got != want) {
        gln_test_fail_at(file, line, "%s -> %s, expected %s (last error: %s)", expr,
                         gln_status_string(got), gln_status_string(want), gln_last_error());
        return;
    }
    if (needle && !strstr(gln_last_error(), needle))
        gln_test_fail_at(file, line, "%s: message '%s' does not mention '%s'", expr, gln_last_error(),
                         needle);
}

gln_context_t *gln_test_cpu_context(void) {
    static gln_context_t *ctx;
    if (!ctx) {
        gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
        CHECK_OK(gln_context_create(&o, &ctx));
    }
    return ctx;
}

gln_context_t *gln_test_cuda_context(void *stream) {
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CUDA;
    o.stream = stream;
    gln_context_t *cu = NULL;
    CHECK_OK(gln_context_create(&o, &cu));
    return cu;
}

int gln_test_cuda_pair(gln_context_t **cpu, gln_context_t **cuda) {
    *cpu = *cuda = NULL;
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CUDA;
    gln_status_t st = gln_backend_available(GLN_BACKEND_CUDA) ? gln_context_create(&o, cuda)
                                                               : GLN_STATUS_NOT_SUPPORTED;
    if (st == GLN_STATUS_NOT_SUPPORTED) {
        printf("skipped: the CUDA backend is not available (not compiled in, or no device)\n");
        return 77;
    }
    if (st != GLN_STATUS_SUCCESS) {
        fprintf(stderr, "cannot create a CUDA context: %s (%s)\n", gln_status_string(st),
                gln_last_error());
        return 1;
    }
    gln_context_options_t oc = GLN_CONTEXT_OPTIONS_INIT;
    if (gln_context_create(&oc, cpu) != GLN_STATUS_SUCCESS) {
        fprintf(stderr, "cannot create a CPU context: %s\n", gln_last_error());
        gln_context_destroy(*cuda);
        *cuda = NULL;
        return 1;
    }
    return 0;
}

int gln_test_cuda_main(int argc, char **argv, gln_context_t **cpu, gln_context_t **cuda,
                       const gln_test_case_t *cases, size_t count) {
    int setup = gln_test_cuda_pair(cpu, cuda);
    if (setup != 0) return setup;
    int rc = gln_test_main(argc, argv, cases, count);
    gln_context_destroy(*cuda);
    gln_context_destroy(*cpu);
    *cpu = *cuda = NULL;
    return rc;
}

int gln_test_skip_no_cuda(void) {
    printf("skipped: the CUDA backend is not compiled in\n");
    return 77;
}

gln_rng_t gln_rng_seed(uint64_t seed) {
    gln_rng_t r = {seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull};
    if (r.s == 0) r.s = 1;
    return r;
}

uint64_t gln_rng_u64(gln_rng_t *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

double gln_rng_uniform(gln_rng_t *r, double lo, double hi) {
    return lo + (hi - lo) * ((double)(gln_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0));
}

double gln_rng_normal(gln_rng_t *r) {
    double u1 = gln_rng_uniform(r, 1e-300, 1.0), u2 = gln_rng_uniform(r, 0.0, 1.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int64_t gln_rng_int(gln_rng_t *r, int64_t lo, int64_t hi) {
    return lo + (int64_t)(gln_rng_u64(r) % (uint64_t)(hi - lo + 1));
}

/* Layout of a test allocation: [size_t bytes][pad to 64][payload][64-byte guard]. */
#define GUARD_BYTES 64
#define HEADER_BYTES 64
#define GUARD_BYTE 0xC3

void *gln_test_alloc(size_t bytes) {
    unsigned char *base = malloc(HEADER_BYTES + bytes + GUARD_BYTES);
    if (!base) {
        fprintf(stderr, "test allocation of %zu bytes failed\n", bytes);
        exit(3);
    }
    memcpy(base, &bytes, sizeof bytes);
    memset(base + HEADER_BYTES, 0, bytes);
    memset(base + HEADER_BYTES + bytes, GUARD_BYTE, GUARD_BYTES);
    return base + HEADER_BYTES;
}

int gln_guard_ok(const void *ptr) {
    const unsigned char *p = ptr;
    size_t bytes;
    memcpy(&bytes, p - HEADER_BYTES, sizeof bytes);
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (p[bytes + i] != GUARD_BYTE) return 0;
    return 1;
}

void gln_test_free(void *ptr) {
    if (ptr) free((unsigned char *)ptr - HEADER_BYTES);
}

void gln_poison(void *ptr, gln_dtype_t dtype, size_t count) {
    switch (dtype) {
    case GLN_DTYPE_FP32:
    case GLN_DTYPE_BF16:
    case GLN_DTYPE_FP16:
        for (size_t i = 0; i < count; i++) gln_store(ptr, dtype, i, NAN);
        break;
    default: memset(ptr, 0xA5, count * gln_dtype_size(dtype)); break;
    }
}

double gln_load(const void *ptr, gln_dtype_t dtype, size_t index) {
    switch (dtype) {
    case GLN_DTYPE_FP32: return ((const float *)ptr)[index];
    case GLN_DTYPE_BF16: return gln_bf16_to_fp32(((const uint16_t *)ptr)[index]);
    case GLN_DTYPE_FP16: return gln_fp16_to_fp32(((const uint16_t *)ptr)[index]);
    default: return NAN;
    }
}

void gln_store(void *ptr, gln_dtype_t dtype, size_t index, double value) {
    float f = (float)value;
    switch (dtype) {
    case GLN_DTYPE_FP32: ((float *)ptr)[index] = f; break;
    case GLN_DTYPE_BF16: ((uint16_t *)ptr)[index] = gln_fp32_to_bf16(f); break;
    case GLN_DTYPE_FP16: ((uint16_t *)ptr)[index] = gln_fp32_to_fp16(f); break;
    default: break;
    }
}

double gln_round_to(double value, gln_dtype_t dtype) {
    unsigned char tmp[8];
    gln_store(tmp, dtype, 0, value);
    return gln_load(tmp, dtype, 0);
}

double gln_check_close(const char *what, const void *got, gln_dtype_t dtype, const double *ref,
                       size_t count, double rtol, double atol) {
    double worst = 0.0;
    int reported = 0;
    for (size_t i = 0; i < count; i++) {
        double g = gln_load(got, dtype, i), r = ref[i];
        double frac;
        if (isnan(r) || isnan(g)) {
            frac = (isnan(r) && isnan(g)) ? 0.0 : INFINITY;
        } else {
            double tol = atol + rtol * fabs(r);
            double err = fabs(g - r);
            frac = tol > 0 ? err / tol : (err == 0 ? 0.0 : INFINITY);
        }
        if (frac > worst) worst = frac;
        if (frac > 1.0 && reported < 5) {
            reported++;
            gln_test_fail_at(__FILE__, __LINE__, "%s[%zu]: got %.9g, want %.9g (rtol %g atol %g)",
                             what, i, g, r, rtol, atol);
        }
    }
    return worst;
}

int gln_check_bitwise(const char *what, const void *a, const void *b, size_t bytes) {
    const unsigned char *pa = a, *pb = b;
    for (size_t i = 0; i < bytes; i++) {
        if (pa[i] != pb[i]) {
            gln_test_fail_at(__FILE__, __LINE__, "%s: first difference at byte %zu (%02x vs %02x)",
                             what, i, pa[i], pb[i]);
            return 0;
        }
    }
    return 1;
}

int gln_check_optimizer_state(const char *what, const float *w, const float *m, const float *v, const float *w_want,
                              const float *m_want, const float *v_want, int64_t n) {
    const float *got[3] = {w, m, v}, *want[3] = {w_want, m_want, v_want};
    static const char *const buf[3] = {"master", "exp_avg", "exp_avg_sq"};
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s: %s", what, buf[i]);
        ok &= gln_check_bitwise(name, got[i], want[i], (size_t)n * 4);
    }
    return ok;
}

/* The test harness shared by every C test.
 *
 * A test binary is a list of cases run by gln_test_main(); it fails through its exit status.
 * Checks record a failure with file:line and carry on (so one run shows every broken case).
 * Outputs are poisoned with NaN (or a byte pattern) before each run and guarded by sentinels. */
#ifndef GLN_TEST_HARNESS_H
#define GLN_TEST_HARNESS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "grouplin.h"

typedef struct gln_test_case {
    const char *name;
    void (*fn)(void);
} gln_test_case_t;

/* Runs every case (or those whose name contains argv[1]); returns the process exit status. */
int gln_test_main(int argc, char **argv, const gln_test_case_t *cases, size_t count);
#define GLN_TEST_MAIN(...)                                                                      \
    int main(int argc, char **argv) {                                                           \
        static const gln_test_case_t cases_[] = {__VA_ARGS__};                                  \
        return gln_test_main(argc, argv, cases_, sizeof cases_ / sizeof cases_[0]);             \
    }
#define GLN_CASE(fn) {#fn, fn}

void gln_test_fail_at(const char *file, int line, const char *fmt, ...);
int gln_test_failures(void);

#define CHECK(cond)                                                                             \
    do {                                                                                        \
        if (!(cond)) gln_test_fail_at(__FILE__, __LINE__, "CHECK(%s) failed", #cond);           \
    } while (0)
#define CHECK_MSG(cond, ...)                                                                    \
    do {                                                                                        \
        if (!(cond)) gln_test_fail_at(__FILE__, __LINE__, __VA_ARGS__);                         \
    } while (0)
/* A call expected to succeed; on failure prints gln_last_error(). */
#define CHECK_OK(expr)                                                                          \
    do {                                                                                        \
        gln_status_t st_ = (expr);                                                              \
        if (st_ != GLN_STATUS_SUCCESS)                                                          \
            gln_test_fail_at(__FILE__, __LINE__, "%s -> %s (%s)", #expr, gln_status_string(st_), \
                             gln_last_error());                                                 \
    } while (0)
/* A call expected to fail with `status` and a message mentioning `needle` (may be NULL). */
#define CHECK_STATUS(expr, status, needle)                                                      \
    gln_test_check_status((expr), (status), (needle), #expr, __FILE__, __LINE__)
void gln_test_check_status(gln_status_t got, gln_status_t want, const char *needle, const char *expr,
                           const char *file, int line);

/* A CPU context shared by the cases of one test binary (created on first use, lives until exit). */
gln_context_t *gln_test_cpu_context(void);

/* A CUDA context whose work runs on `stream` (a cudaStream_t of the caller's, as a test that
 * captures a graph on its own stream needs; NULL: the context's own stream).  NULL when it cannot
 * be created, the failure recorded with CHECK_OK.  The caller destroys it. */
gln_context_t *gln_test_cuda_context(void *stream);

/* Contexts for a test comparing the CUDA backend to the CPU backend.  Returns 0 with both
 * created, 77 (the skip status) when the CUDA backend is not compiled in or has no device, 1 on
 * any other failure (reported on stderr).  The caller destroys both contexts. */
int gln_test_cuda_pair(gln_context_t **cpu, gln_context_t **cuda);

/* The main() of a test comparing the CUDA backend to the CPU backend: creates both contexts with
 * gln_test_cuda_pair() into *cpu and *cuda (the test's globals), runs the cases with
 * gln_test_main(), destroys both contexts and returns the exit status.  Returns 77 (skip) without
 * running a case when the CUDA backend is not compiled in or has no device, 1 when a context
 * cannot be created. */
int gln_test_cuda_main(int argc, char **argv, gln_context_t **cpu, gln_context_t **cuda,
                       const gln_test_case_t *cases, size_t count);
#define GLN_TEST_CUDA_MAIN(cpu, cuda, ...)                                                      \
    int main(int argc, char **argv) {                                                           \
        static const gln_test_case_t cases_[] = {__VA_ARGS__};                                  \
        return gln_test_cuda_main(argc, argv, &(cpu), &(cuda), cases_,                          \
                                  sizeof cases_ / sizeof cases_[0]);                            \
    }
/* Prints that the CUDA backend is not compiled in; returns 77. */
int gln_test_skip_no_cuda(void);
/* The same for a test whose code is compiled only with GLN_TEST_HAVE_CUDA (it uses the CUDA
 * runtime or the CUDA backend's internals; the test wraps all of it in #ifdef GLN_TEST_HAVE_CUDA
 * and writes this macro after the #endif).  Without GLN_TEST_HAVE_CUDA the arguments are dropped
 * unexpanded, and main() reports the skip and exits 77. */
#ifdef GLN_TEST_HAVE_CUDA
#define GLN_TEST_CUDA_ONLY_MAIN(cpu, cuda, ...) GLN_TEST_CUDA_MAIN(cpu, cuda, __VA_ARGS__)
#else
#define GLN_TEST_CUDA_ONLY_MAIN(cpu, cuda, ...)                                                 \
    int main(void) { return gln_test_skip_no_cuda(); }
#endif

/* Deterministic random numbers (xorshift64*), per test. */
typedef struct gln_rng {
    uint64_t s;
} gln_rng_t;
gln_rng_t gln_rng_seed(uint64_t seed);
uint64_t gln_rng_u64(gln_rng_t *r);
double gln_rng_uniform(gln_rng_t *r, double lo, double hi); /* [lo, hi) */
double gln_rng_normal(gln_rng_t *r);
int64_t gln_rng_int(gln_rng_t *r, int64_t lo, int64_t hi);  /* [lo, hi] */

/* Host buffers with a guard region after the payload; gln_guard_ok() checks it is untouched. */
void *gln_test_alloc(size_t bytes);         /* zeroed payload + sentinel guard; never NULL */
int gln_guard_ok(const void *ptr);
void gln_test_free(void *ptr);
/* Fill `count` elements of dtype with NaN (for float dtypes) or 0xA5 bytes (others). */
void gln_poison(void *ptr, gln_dtype_t dtype, size_t count);

/* Element access for high-precision dtypes (fp32 / bf16 / fp16). */
double gln_load(const void *ptr, gln_dtype_t dtype, size_t index);
void gln_store(void *ptr, gln_dtype_t dtype, size_t index, double value); /* RNE to dtype */
/* Round a double to the nearest value of dtype (through fp32, like the library's output). */
double gln_round_to(double value, gln_dtype_t dtype);

/* Compare `count` elements of `got` (dtype) to a float64 reference with |got-ref| <= atol +
 * rtol·|ref|; NaN must match NaN.  Returns the worst error as a fraction of the tolerance
 * (<= 1 passes) and reports the first few violations under `what`. */
double gln_check_close(const char *what, const void *got, gln_dtype_t dtype, const double *ref,
                       size_t count, double rtol, double atol);
/* Bitwise equality of two buffers; reports the first differing element. */
int gln_check_bitwise(const char *what, const void *a, const void *b, size_t bytes);
/* An Adam / SGD state (master weights, exp_avg, exp_avg_sq; n floats each) equals another bit for
 * bit: each buffer compared (and a difference reported) as "<what>: master" and so on. */
int gln_check_optimizer_state(const char *what, const float *w, const float *m, const float *v, const float *w_want,
                              const float *m_want, const float *v_want, int64_t n);

#endif

/* CPU contexts reserve OpenBLAS's GEMM buffers when they are created: under
 * an address-space limit with room for two buffers beyond what the process already maps,
 *   - two 1-thread contexts are created, a third fails with GLN_STATUS_OUT_OF_MEMORY and a
 *     message naming the call, the count and the limit (OpenBLAS would have hung in the
 *     third context's first GEMM had it run beside the other two);
 *   - GEMMs on the two live contexts still run under the limit;
 *   - once one context is destroyed, the third can be created: the pool keeps its buffers.
 * The limit is set from inside (setrlimit), relative to this process's current size, so it
 * works whatever the build links; under a sanitizer (shadow memory, its own allocator) the
 * test is skipped.  An alarm turns a hang into a failure. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backend/cpu/cpu_blas_buffers.h"
#include "harness.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

#ifdef UNDER_SANITIZER
int main(void) {
    printf("skipped: address-space limits do not work under a sanitizer\n");
    return 77;
}
#else
/* This process's mapped address space in bytes (/proc/self/statm: size in pages), 0 if unknown. */
static size_t mapped_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f) return 0;
    if (fscanf(f, "%lu", &pages) != 1) pages = 0;
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL: test_blas_buffers hung (a GEMM under the limit did not return)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static gln_context_t *one_thread_context(gln_status_t *st) {
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.num_threads = 1;
    gln_context_t *ctx = NULL;
    *st = gln_context_create(&o, &ctx);
    return ctx;
}

/* A 256 x 256 x 256 FP32 GEMM (large enough that OpenBLAS takes a pool buffer) of ones. */
static void gemm_runs(gln_context_t *ctx) {
    enum { N = 256 };
    static float a[N * N], b[N * N], d[N * N];
    for (int i = 0; i < N * N; i++) a[i] = b[i] = 1.0f;
    gln_tensor_t A = gln_tensor_make(GLN_DTYPE_FP32, N, N, a), B = gln_tensor_make(GLN_DTYPE_FP32, N, N, b);
    gln_tensor_t D = gln_tensor_make(GLN_DTYPE_FP32, N, N, d);
    CHECK_OK(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &D, NULL, 0));
    CHECK(d[0] == (float)N && d[N * N - 1] == (float)N);
}

static void test_reserved_at_create(void) {
    struct rlimit old;
    CHECK(getrlimit(RLIMIT_AS, &old) == 0);
    const size_t now = mapped_bytes();
    CHECK(now > 0);
    /* Room for two buffers and half of a third (the contexts' own small allocations). */
    const size_t room = 2 * GLN_CPU_BLAS_BUFFER_BYTES + GLN_CPU_BLAS_BUFFER_BYTES / 2;
    struct rlimit lim = old;
    lim.rlim_cur = (rlim_t)(now + room);
    if (old.rlim_max != RLIM_INFINITY && lim.rlim_cur > old.rlim_max) {
        printf("  skipped: the hard address-space limit leaves no room for the test\n");
        return;
    }
    CHECK(setrlimit(RLIMIT_AS, &lim) == 0);
    signal(SIGALRM, on_alarm);
    alarm(60);

    gln_status_t sa, sb, sc;
    gln_context_t *a = one_thread_context(&sa), *b = one_thread_context(&sb);
    gln_context_t *c = one_thread_context(&sc);
    char message[512];
    snprintf(message, sizeof message, "%s", gln_last_error());
    CHECK_MSG(sa == GLN_STATUS_SUCCESS && sb == GLN_STATUS_SUCCESS, "two contexts under the limit: %s",
              message);
    CHECK_MSG(sc == GLN_STATUS_OUT_OF_MEMORY && c == NULL,
              "a third context (no room for its buffer) gave %s, expected out of memory", gln_status_string(sc));
    CHECK_MSG(strstr(message, "gln_context_create: out of address space for OpenBLAS's GEMM buffers: "
                              "2 of 3 buffers") != NULL, "message '%s'", message);
    CHECK_MSG(strstr(message, "ulimit -v") != NULL, "message '%s' does not name the limit", message);
    if (a) gemm_runs(a);
    if (b) gemm_runs(b);
    gln_context_destroy(a);
    c = one_thread_context(&sc);
    CHECK_MSG(sc == GLN_STATUS_SUCCESS, "after a context is gone its buffer is free again: %s", gln_last_error());
    if (c) gemm_runs(c);
    gln_context_destroy(b);
    gln_context_destroy(c);

    alarm(0);
    CHECK(setrlimit(RLIMIT_AS, &old) == 0);
}

GLN_TEST_MAIN(GLN_CASE(test_reserved_at_create))
#endif

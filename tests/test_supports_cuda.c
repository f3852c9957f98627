/* gln_backend_supports against the CUDA backend's calls: every public call runs
 * on a CUDA context with tensors in device memory for every valid combination of its dtypes,
 * scaling modes and layout and every value of each field in turn (tests/harness/op_probe.c);
 * the query must say INVALID_ARGUMENT, supported or unsupported exactly when the call returns
 * INVALID_ARGUMENT, SUCCESS or NOT_SUPPORTED.  Skips (77) without CUDA or a device. */
#include "harness.h"
#include "op_probe.h"

static gln_context_t *g_cu, *g_cpu;

static void test_cuda_matches_calls(void) {
    gln_test_probe_t *p = gln_test_probe_create(g_cu);
    CHECK(p != NULL);
    if (!p) return;
    gln_test_probe_counts_t c;
    gln_test_probe_all(p, GLN_BACKEND_CUDA, &c, NULL);
    CHECK_MSG(c.disagree == 0, "%ld queries disagree with their calls", c.disagree);
    CHECK(c.supported > 0 && c.unsupported > 0 && c.invalid > 0);
    printf("cuda: %ld supported, %ld unsupported, %ld invalid queries, each matching its call\n", c.supported,
           c.unsupported, c.invalid);
    CHECK_OK(gln_synchronize(g_cu));
    gln_test_probe_destroy(p);
}

GLN_TEST_CUDA_MAIN(g_cpu, g_cu, GLN_CASE(test_cuda_matches_calls))

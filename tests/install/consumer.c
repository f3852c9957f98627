/* A program outside the tree, built against an installed grouplin (find_package or pkg-config). */
#include <grouplin.h>
#include <stdio.h>

int main(void) {
    gln_context_t *ctx = NULL;
    if (gln_context_create(NULL, &ctx) != GLN_STATUS_SUCCESS) {
        fprintf(stderr, "context: %s\n", gln_last_error());
        return 1;
    }
    float x[4] = {1.0f, 2.0f, 3.0f, 4.0f}, w[2] = {1.0f, 1.0f}, y[2] = {0};
    gln_tensor_t A = gln_tensor_make(GLN_DTYPE_FP32, 1, 2, w); /* W [1, 2] */
    gln_tensor_t B = gln_tensor_make(GLN_DTYPE_FP32, 2, 2, x); /* x [2, 2] */
    gln_tensor_t D = gln_tensor_make(GLN_DTYPE_FP32, 2, 1, y); /* y = x·Wᵀ [2, 1] */
    gln_status_t st = gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &D, NULL, 0);
    gln_context_destroy(ctx);
    if (st != GLN_STATUS_SUCCESS || y[0] != 3.0f || y[1] != 7.0f) {
        fprintf(stderr, "gemm: %s (%g %g)\n", gln_last_error(), y[0], y[1]);
        return 1;
    }
    printf("installed grouplin works\n");
    return 0;
}

/* The grouped GEMM on the CPU: the per-expert kernel of gln_cpu_gemm (gln_cpu_gemm_run) over
 * member views, with one workspace sized for the largest expert.  Same kernel, same operands,
 * same order: the result is bitwise identical to N separate gln_gemm calls. */
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_gemm_internal.h"
#include "backend/context.h"
#include "common/error.h"
#include "tensor/tensor.h"

/* Operands of expert i. */
typedef struct expert_problem {
    gln_tensor_t a, b, d;
    const gln_tensor_t *bias;
} expert_problem_t;

static gln_status_t expert_problem(const gln_grouped_gemm_args_t *args, int32_t i, expert_problem_t *p) {
    GLN_TRY(gln_grouped_member(args->b, i, &p->b));
    p->bias = NULL;
    if (args->layout == GLN_LAYOUT_NT) {
        GLN_TRY(gln_grouped_member(args->a_grouped, i, &p->a));
        p->d = args->d_list[i];
    } else {
        p->a = args->a_list[i];
        GLN_TRY(gln_grouped_member(args->d_grouped, i, &p->d));
        if (args->bias_list) p->bias = &args->bias_list[i];
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_cpu_grouped_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *args) {
    gln_cpu_gemm_ws_t ws = {0};
    void *block = NULL;
    gln_status_t st = GLN_STATUS_SUCCESS;
    expert_problem_t p;
    for (int32_t i = 0; i < args->b->num; i++) {
        GLN_CHECK(st, fail, expert_problem(args, i, &p));
        gln_cpu_gemm_ws_need(args->layout, &p.a, &p.b, &p.d, p.bias, &ws);
    }
    GLN_CHECK(st, fail, gln_cpu_gemm_ws_alloc(ctx, &ws, &block));
    for (int32_t i = 0; i < args->b->num; i++) {
        GLN_CHECK(st, fail, expert_problem(args, i, &p));
        GLN_CHECK(st, fail, gln_cpu_gemm_run(args->layout, &p.a, &p.b, &p.d, p.bias, args->accumulate, &ws));
    }
fail:
    gln_ctx_free(ctx, block);
    return st;
}

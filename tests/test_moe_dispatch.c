/* The MoE ops behind the backend table.
 *
 *   - Every public MoE call dispatches through its slot: a table whose slots count their calls
 *     and forward to the CPU reference gives results bitwise equal to the plain CPU context,
 *     one slot call each; invalid arguments and empty calls never reach the slot.
 *   - A backend without the slots (the CUDA table today, and a CPU table with them cleared)
 *     returns GLN_STATUS_NOT_SUPPORTED naming the call and the backend, before reading any index
 *     buffer: experts / row_of full of out-of-range values still give NOT_SUPPORTED, not
 *     INVALID_ARGUMENT (on a device backend those buffers would be device memory). */
#include <string.h>

#include "backend/backend.h"
#include "backend/context.h"
#include "harness.h"

enum { T = 5, E = 4, K = 2, H = 6, P = T * K };

static const gln_backend_ops_t *cpu;
static int calls[9];

#define WRAP(i, name, params, args)                                                             \
    static gln_status_t counted_##name params {                                                \
        calls[i]++;                                                                            \
        return cpu->name args;                                                                 \
    }
WRAP(0, moe_router_forward,
     (gln_context_t * c, int64_t t, int32_t e, int32_t k, const float *l, int32_t *ex, float *g), (c, t, e, k, l, ex, g))
WRAP(1, moe_router_backward,
     (gln_context_t * c, int64_t t, int32_t e, int32_t k, const float *l, const int32_t *ex, const float *dg,
      float *dl),
     (c, t, e, k, l, ex, dg, dl))
WRAP(2, moe_permute_plan,
     (gln_context_t * c, int64_t t, int32_t e, int32_t k, int64_t a, const int32_t *ex, int64_t *s, int64_t *r),
     (c, t, e, k, a, ex, s, r))
WRAP(3, moe_permute, (gln_context_t * c, int64_t t, int32_t k, const int64_t *r, const gln_tensor_t *x, gln_tensor_t *xp),
     (c, t, k, r, x, xp))
WRAP(4, moe_permute_backward,
     (gln_context_t * c, int64_t t, int32_t k, const int64_t *r, const gln_tensor_t *d, gln_tensor_t *dx),
     (c, t, k, r, d, dx))
WRAP(5, moe_unpermute,
     (gln_context_t * c, int64_t t, int32_t k, const int64_t *r, const float *g, const gln_tensor_t *yp,
      gln_tensor_t *y),
     (c, t, k, r, g, yp, y))
WRAP(6, moe_unpermute_backward,
     (gln_context_t * c, int64_t t, int32_t k, const int64_t *r, const float *g, const gln_tensor_t *yp,
      const gln_tensor_t *dy, gln_tensor_t *dyp, float *dg),
     (c, t, k, r, g, yp, dy, dyp, dg))
WRAP(7, activation_forward, (gln_context_t * c, gln_activation_t a, const gln_tensor_t *in, gln_tensor_t *out),
     (c, a, in, out))
WRAP(8, activation_backward,
     (gln_context_t * c, gln_activation_t a, const gln_tensor_t *in, const gln_tensor_t *d, gln_tensor_t *din),
     (c, a, in, d, din))

/* A context sharing the CPU context's state, dispatching through `ops`. */
static struct gln_context fake_context(const gln_backend_ops_t *ops) {
    struct gln_context c = *gln_test_cpu_context();
    c.ops = ops;
    return c;
}

/* Inputs of one forward + backward through every MoE op. */
typedef struct moe_io {
    float logits[T * E], gates[P], dgates[P], dlogits[T * E], dg2[P];
    int32_t experts[P];
    int64_t splits[E], row_of[P];
    float x[T * H], xp[P * H], y[T * H], dy[T * H], dyp[P * H], dx[T * H];
    float a_in[T * 2 * H], a_out[T * H], a_din[T * 2 * H];
} moe_io_t;

static void fill(float *v, size_t n, gln_rng_t *r) {
    for (size_t i = 0; i < n; i++) v[i] = (float)gln_rng_uniform(r, -2.0, 2.0);
}

/* The whole chain on ctx; every call must succeed. */
static void run_chain(gln_context_t *ctx, moe_io_t *io) {
    gln_rng_t r = gln_rng_seed(42);
    fill(io->logits, T * E, &r), fill(io->x, T * H, &r), fill(io->dy, T * H, &r), fill(io->dg2, P, &r);
    fill(io->a_in, T * 2 * H, &r);
    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_FP32, T, H, io->x), xp = gln_tensor_make(GLN_DTYPE_FP32, P, H, io->xp);
    gln_tensor_t y = gln_tensor_make(GLN_DTYPE_FP32, T, H, io->y), dy = gln_tensor_make(GLN_DTYPE_FP32, T, H, io->dy);
    gln_tensor_t dyp = gln_tensor_make(GLN_DTYPE_FP32, P, H, io->dyp), dx = gln_tensor_make(GLN_DTYPE_FP32, T, H, io->dx);
    gln_tensor_t ain = gln_tensor_make(GLN_DTYPE_FP32, T, 2 * H, io->a_in);
    gln_tensor_t aout = gln_tensor_make(GLN_DTYPE_FP32, T, H, io->a_out);
    gln_tensor_t adin = gln_tensor_make(GLN_DTYPE_FP32, T, 2 * H, io->a_din);
    CHECK_OK(gln_moe_router_forward(ctx, T, E, K, io->logits, io->experts, io->gates));
    CHECK_OK(gln_moe_permute_plan(ctx, T, E, K, io->experts, io->splits, io->row_of));
    CHECK_OK(gln_moe_permute(ctx, T, K, io->row_of, &x, &xp));
    CHECK_OK(gln_moe_unpermute(ctx, T, K, io->row_of, io->gates, &xp, &y));
    CHECK_OK(gln_moe_unpermute_backward(ctx, T, K, io->row_of, io->gates, &xp, &dy, &dyp, io->dgates));
    CHECK_OK(gln_moe_permute_backward(ctx, T, K, io->row_of, &dyp, &dx));
    CHECK_OK(gln_moe_router_backward(ctx, T, E, K, io->logits, io->experts, io->dg2, io->dlogits));
    CHECK_OK(gln_activation_forward(ctx, GLN_ACT_SWIGLU, &ain, &aout));
    CHECK_OK(gln_activation_backward(ctx, GLN_ACT_SWIGLU, &ain, &aout, &adin));
}

static gln_backend_ops_t counting_table(void) {
    gln_backend_ops_t t = *cpu;
    t.name = "counting";
    t.moe_router_forward = counted_moe_router_forward;
    t.moe_router_backward = counted_moe_router_backward;
    t.moe_permute_plan = counted_moe_permute_plan;
    t.moe_permute = counted_moe_permute;
    t.moe_permute_backward = counted_moe_permute_backward;
    t.moe_unpermute = counted_moe_unpermute;
    t.moe_unpermute_backward = counted_moe_unpermute_backward;
    t.activation_forward = counted_activation_forward;
    t.activation_backward = counted_activation_backward;
    return t;
}

static void test_calls_go_through_the_slots(void) {
    cpu = gln_backend_cpu_ops();
    const gln_backend_ops_t table = counting_table();
    struct gln_context fake = fake_context(&table);
    static moe_io_t ref, got;
    memset(&ref, 0, sizeof ref), memset(&got, 0, sizeof got);
    memset(calls, 0, sizeof calls);
    run_chain(gln_test_cpu_context(), &ref);
    for (int i = 0; i < 9; i++) CHECK_MSG(calls[i] == 0, "slot %d called by the plain CPU context", i);
    run_chain(&fake, &got);
    for (int i = 0; i < 9; i++) CHECK_MSG(calls[i] == 1, "slot %d called %d times (want 1)", i, calls[i]);
    gln_check_bitwise("every MoE output through the slots", &got, &ref, sizeof ref);

    /* invalid arguments are refused in src/moe, empty calls return there: no slot call */
    memset(calls, 0, sizeof calls);
    int64_t bad_rows[P];
    for (int i = 0; i < P; i++) bad_rows[i] = P; /* one past the last permuted row */
    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_FP32, T, H, got.x), xp = gln_tensor_make(GLN_DTYPE_FP32, P, H, got.xp);
    CHECK_STATUS(gln_moe_permute(&fake, T, K, bad_rows, &x, &xp), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_moe_permute: row_of[0] = 10 must be in [0, 10)");
    int32_t bad_ex[P];
    for (int i = 0; i < P; i++) bad_ex[i] = E;
    CHECK_STATUS(gln_moe_permute_plan(&fake, T, E, K, bad_ex, got.splits, got.row_of), GLN_STATUS_INVALID_ARGUMENT,
                 "experts[0] = 4 must be in [0, 4)");
    CHECK_STATUS(gln_moe_router_forward(&fake, T, E, E + 1, got.logits, got.experts, got.gates),
                 GLN_STATUS_INVALID_ARGUMENT, "k 5");
    gln_tensor_t e0 = gln_tensor_make(GLN_DTYPE_BF16, 0, H, NULL);
    CHECK_OK(gln_moe_router_forward(&fake, 0, E, K, NULL, NULL, NULL));
    CHECK_OK(gln_moe_permute(&fake, 0, K, NULL, &e0, &e0));
    CHECK_OK(gln_activation_forward(&fake, GLN_ACT_GELU, &e0, &e0));
    for (int i = 0; i < 9; i++) CHECK_MSG(calls[i] == 0, "slot %d reached by an invalid or empty call", i);
}

/* Every MoE call on a table without the slots: NOT_SUPPORTED naming call and backend, the
 * index buffers (all out of range) never read. */
static void expect_refused(gln_context_t *ctx, const char *backend) {
    static moe_io_t io;
    memset(&io, 0, sizeof io);
    for (int i = 0; i < P; i++) io.experts[i] = 1000, io.row_of[i] = 1000;
    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_FP32, T, H, io.x), xp = gln_tensor_make(GLN_DTYPE_FP32, P, H, io.xp);
    gln_tensor_t y = gln_tensor_make(GLN_DTYPE_FP32, T, H, io.y), dyp = gln_tensor_make(GLN_DTYPE_FP32, P, H, io.dyp);
    gln_tensor_t ain = gln_tensor_make(GLN_DTYPE_FP32, T, 2 * H, io.a_in);
    gln_tensor_t aout = gln_tensor_make(GLN_DTYPE_FP32, T, H, io.a_out);
    gln_tensor_t adin = gln_tensor_make(GLN_DTYPE_FP32, T, 2 * H, io.a_din);
    char want[160];
    const gln_status_t NS = GLN_STATUS_NOT_SUPPORTED;
#define REFUSED(call, expr)                                                                     \
    snprintf(want, sizeof want, "gln_%s: operation %s is not implemented by the %s backend", call, call, backend); \
    CHECK_STATUS(expr, NS, want)
    REFUSED("moe_router_forward", gln_moe_router_forward(ctx, T, E, K, io.logits, io.experts, io.gates));
    REFUSED("moe_router_backward", gln_moe_router_backward(ctx, T, E, K, io.logits, io.experts, io.dg2, io.dlogits));
    REFUSED("moe_permute_plan", gln_moe_permute_plan(ctx, T, E, K, io.experts, io.splits, io.row_of));
    REFUSED("moe_permute", gln_moe_permute(ctx, T, K, io.row_of, &x, &xp));
    REFUSED("moe_permute_backward", gln_moe_permute_backward(ctx, T, K, io.row_of, &xp, &x));
    REFUSED("moe_unpermute", gln_moe_unpermute(ctx, T, K, io.row_of, io.gates, &xp, &y));
    REFUSED("moe_unpermute_backward", gln_moe_unpermute_backward(ctx, T, K, io.row_of, io.gates, &xp, &y, &dyp, io.dgates));
    snprintf(want, sizeof want, "gln_activation_forward: operation activation_forward is not implemented by the %s backend",
             backend);
    CHECK_STATUS(gln_activation_forward(ctx, GLN_ACT_SWIGLU, &ain, &aout), NS, want);
    snprintf(want, sizeof want,
             "gln_activation_backward: operation activation_backward is not implemented by the %s backend", backend);
    CHECK_STATUS(gln_activation_backward(ctx, GLN_ACT_SWIGLU, &ain, &aout, &adin), NS, want);
    /* refused for empty calls too, and still validated first */
    gln_tensor_t e0 = gln_tensor_make(GLN_DTYPE_BF16, 0, H, NULL);
    CHECK_STATUS(gln_moe_permute(ctx, 0, K, NULL, &e0, &e0), NS, "gln_moe_permute");
    CHECK_STATUS(gln_moe_router_forward(ctx, T, E, 0, io.logits, io.experts, io.gates), GLN_STATUS_INVALID_ARGUMENT,
                 "k 0");
#undef REFUSED
}

static void test_backend_without_the_slots(void) {
    cpu = gln_backend_cpu_ops();
    gln_backend_ops_t table = *cpu;
    table.name = "slotless";
    table.moe_router_forward = NULL, table.moe_router_backward = NULL, table.moe_permute_plan = NULL;
    table.moe_permute = NULL, table.moe_permute_backward = NULL, table.moe_unpermute = NULL;
    table.moe_unpermute_backward = NULL, table.activation_forward = NULL, table.activation_backward = NULL;
    struct gln_context fake = fake_context(&table);
    expect_refused(&fake, "slotless");

    /* the CPU table and the CUDA table (present in CUDA builds, with or without a device) have
     * every slot: the CUDA kernels are checked against the CPU ones in test_cuda_moe */
    const gln_backend_ops_t *cu = gln_backend_cuda_ops();
    if (cu)
        CHECK(cu->moe_router_forward && cu->moe_router_backward && cu->moe_permute_plan && cu->moe_permute &&
              cu->moe_permute_backward && cu->moe_unpermute && cu->moe_unpermute_backward &&
              cu->activation_forward && cu->activation_backward);
    CHECK(cpu->moe_router_forward && cpu->moe_router_backward && cpu->moe_permute_plan && cpu->moe_permute &&
          cpu->moe_permute_backward && cpu->moe_unpermute && cpu->moe_unpermute_backward && cpu->activation_forward &&
          cpu->activation_backward);
}

GLN_TEST_MAIN(GLN_CASE(test_calls_go_through_the_slots), GLN_CASE(test_backend_without_the_slots))

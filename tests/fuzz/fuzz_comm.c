/* Fuzz harness 4: the communicator argument checks (self communicator) and the sharded weight
 * group over it, with a layer on top.
 *
 * Promises checked beyond "no memory error, no UB, no leak":
 *   - a collective with count > 0 and a NULL buffer, an invalid dtype or op, a reduction in a
 *     non-reducible dtype, a size that overflows, or buffers that overlap other than in place
 *     is refused; every other call succeeds and, over one rank, copies send to recv exactly;
 *   - the sharded group keeps what load_full gave it: the master shard and gather_master
 *     return it bit for bit; wild sizes are refused at create. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

enum { MAX_COUNT = 64 };

static int reducible(gln_dtype_t d) {
    return d == GLN_DTYPE_FP32 || d == GLN_DTYPE_INT32 || d == GLN_DTYPE_INT64;
}

static void collective(fz_t *f, gln_comm_t *comm) {
    int call = fz_pick(f, 4), wild = 0;
    gln_dtype_t dtype = (gln_dtype_t)fz_int(f, -1, 8);
    gln_reduce_op_t op = (gln_reduce_op_t)fz_int(f, -1, 2);
    size_t es = gln_dtype_size(dtype);
    int64_t c = fz_size(f, MAX_COUNT, &wild);
    size_t count = (size_t)c, bytes = 0;
    int overflow = es && __builtin_mul_overflow(count, es, &bytes);
    if (wild && !overflow) count = (size_t)c & 63; /* only huge sizes that must be refused */
    bytes = overflow ? 0 : count * (es ? es : 1);

    /* Buffers: 0 one or both NULL, 1 separate, 2 in place (send == recv), 3 send one element
     * past recv in one block (a partial overlap when count > 1). */
    int layout = fz_pick(f, 4);
    size_t cap = overflow ? 16 : bytes, shift = 0;
    unsigned char *send = NULL, *recv = NULL;
    if (layout == 0) {
        int keep = fz_pick(f, 3); /* 0: neither, 1: send only, 2: recv only */
        if (keep == 1) send = fz_alloc(f, cap);
        if (keep == 2) recv = fz_alloc(f, cap);
    } else if (layout == 1) {
        send = fz_alloc(f, cap);
        recv = fz_alloc(f, cap);
    } else {
        shift = layout == 3 && count > 1 ? es : 0;
        recv = fz_alloc(f, cap + shift);
        send = recv ? recv + shift : NULL;
    }
    for (size_t i = 0; send && i < cap; i++) send[i] = fz_u8(f);
    unsigned char *want = fz_alloc(f, cap);
    if (want && send && cap) memcpy(want, send, cap);

    gln_status_t st;
    const char *name;
    switch (call) {
    case 0:
        name = "gln_comm_allgather";
        st = gln_comm_allgather(comm, send, recv, count, dtype);
        break;
    case 1:
        name = "gln_comm_reduce_scatter";
        st = gln_comm_reduce_scatter(comm, send, recv, count, dtype, op);
        break;
    case 2:
        name = "gln_comm_allreduce";
        st = gln_comm_allreduce(comm, send, recv, count, dtype, op);
        break;
    default:
        name = "gln_comm_barrier";
        st = gln_comm_barrier(comm);
        break;
    }
    fz_status(st, name);
    if (call == 3) {
        FZ_ASSERT(st == GLN_STATUS_SUCCESS, "barrier on the self communicator failed: %s",
                  gln_last_error());
        return;
    }
    int reduce = call == 1 || call == 2;
    int in_place = layout == 2 || (layout == 3 && shift == 0), partial = layout == 3 && shift > 0;
    int bad = es == 0 || overflow;
    if (reduce) bad |= op < GLN_REDUCE_SUM || op > GLN_REDUCE_MAX || !reducible(dtype);
    if (count > 0) {
        bad |= !send || !recv || partial;
        bad |= call == 1 && in_place; /* reduce-scatter refuses any overlap */
    }
    if (bad) {
        fz_refused(st, name, "invalid arguments");
        return;
    }
    FZ_ASSERT(st == GLN_STATUS_SUCCESS,
              "%s refused valid arguments (count %zu, dtype %d, op %d, layout %d): %s", name, count,
              (int)dtype, (int)op, layout, gln_last_error());
    if (count) FZ_ASSERT(memcmp(recv, want, bytes) == 0, "%s over one rank changed the data", name);
}

static void sharded(fz_t *f, gln_context_t *ctx, gln_comm_t *comm) {
    gln_sharded_weights_config_t cfg = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    int wild = 0;
    cfg.num_experts = (int32_t)fz_int(f, -1, 3);
    cfg.out_features = fz_size(f, 12, &wild);
    cfg.in_features = fz_size(f, 12, &wild);
    cfg.working_dtype = (gln_dtype_t)fz_pick(f, 4);
    cfg.requires_grad = fz_bool(f);
    cfg.async_finalize = fz_bool(f);
    if (fz_u8(f) == 0xff) cfg.size -= 1; /* not a known version: refused */
    gln_sharded_weights_t *sw = NULL;
    gln_status_t st =
        fz_status(gln_sharded_weights_create(ctx, comm, &cfg, &sw), "gln_sharded_weights_create");
    if (wild) fz_refused(st, "gln_sharded_weights_create", "wild sizes");
    if (st != GLN_STATUS_SUCCESS) return;
    int64_t n = cfg.num_experts * cfg.out_features * cfg.in_features;
    float *full = fz_alloc(f, (size_t)n * sizeof(float)),
          *back = fz_alloc(f, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) full[i] = fz_value(f);
    if (fz_status(gln_sharded_weights_load_full(sw, full), "gln_sharded_weights_load_full") ==
        GLN_STATUS_SUCCESS) {
        float *master, *grad;
        int64_t len, off;
        FZ_ASSERT(gln_sharded_weights_shard(sw, &master, &grad, &len, &off) == GLN_STATUS_SUCCESS,
                  "shard: %s", gln_last_error());
        FZ_ASSERT(off == 0 && len >= n, "one rank: shard [%lld, +%lld) for %lld weights",
                  (long long)off, (long long)len, (long long)n);
        FZ_ASSERT(n == 0 || memcmp(master, full, (size_t)n * sizeof(float)) == 0,
                  "master shard != load_full");
        FZ_ASSERT(gln_sharded_weights_sync_working(sw) == GLN_STATUS_SUCCESS, "sync_working: %s",
                  gln_last_error());
        if (fz_status(gln_sharded_weights_gather_master(sw, back),
                      "gln_sharded_weights_gather_master") == GLN_STATUS_SUCCESS)
            FZ_ASSERT(n == 0 || memcmp(back, full, (size_t)n * sizeof(float)) == 0,
                      "gather_master != load_full");
        fz_status(gln_sharded_weights_gather_main_grad(sw, back),
                  "gln_sharded_weights_gather_main_grad");
    }
    /* A layer over the group: one forward + backward on tame data. */
    gln_grouped_linear_config_t lc = GLN_GROUPED_LINEAR_CONFIG_INIT;
    lc.num_experts = cfg.num_experts;
    lc.in_features = cfg.in_features;
    lc.out_features = cfg.out_features;
    lc.bias = 0;
    lc.recipe = (gln_recipe_t)fz_pick(f, 5);
    lc.activation_dtype = (gln_dtype_t)fz_pick(f, 3);
    lc.params.distributed = gln_sharded_weights_protocol(sw);
    gln_grouped_linear_t *layer = NULL;
    if (fz_status(gln_grouped_linear_create(ctx, &lc, &layer),
                  "gln_grouped_linear_create (sharded)") == GLN_STATUS_SUCCESS) {
        int64_t splits[3] = {0, 0, 0}, rows = 0;
        for (int i = 0; i < lc.num_experts; i++) rows += splits[i] = fz_int(f, 0, 6);
        gln_tensor_t x = fz_tensor(f, lc.activation_dtype, rows, lc.in_features);
        gln_tensor_t y = fz_tensor_poisoned(f, lc.activation_dtype, rows, lc.out_features);
        gln_tensor_t dy = fz_tensor(f, lc.activation_dtype, rows, lc.out_features);
        gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
        fa.x = &x;
        fa.m_splits = splits;
        fa.y = &y;
        fa.input_requires_grad = 0;
        gln_grouped_linear_saved_t *saved = NULL;
        if (fz_status(gln_grouped_linear_forward(layer, &fa, &saved),
                      "gln_grouped_linear_forward (sharded)") == GLN_STATUS_SUCCESS) {
            fz_status(gln_grouped_linear_backward(saved, &dy, NULL),
                      "gln_grouped_linear_backward (sharded)");
            gln_grouped_linear_saved_release(saved);
        }
        fz_status(gln_sharded_weights_wait(sw), "gln_sharded_weights_wait");
        size_t live = 1, peak = 0;
        FZ_ASSERT(gln_sharded_weights_materialized_bytes(sw, &live, &peak) == GLN_STATUS_SUCCESS &&
                      live == 0,
                  "materialized weights still live (%zu bytes) after forward + backward", live);
        gln_grouped_linear_destroy(layer);
    }
    FZ_ASSERT(gln_sharded_weights_destroy(sw) == GLN_STATUS_SUCCESS, "destroy: %s",
              gln_last_error());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_t f = fz_begin(data, size);
    gln_context_t *ctx = fz_context();
    gln_comm_t *comm = NULL;
    FZ_ASSERT(gln_comm_create_self(NULL, &comm) == GLN_STATUS_SUCCESS, "comm_create_self: %s",
              gln_last_error());
    int ops = 1 + fz_pick(&f, 4);
    for (int o = 0; o < ops; o++) {
        if (fz_pick(&f, 4) == 0)
            sharded(&f, ctx, comm);
        else
            collective(&f, comm);
        fz_free_all();
    }
    FZ_ASSERT(gln_comm_destroy(comm) == GLN_STATUS_SUCCESS, "comm_destroy");
    return 0;
}

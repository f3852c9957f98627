/* Overlap of the distributed-weights communication with compute: a stack of L sharded grouped
 * linear layers, forward through all of them and backward back, with and without prefetch
 * (the next layer's all-gather started before the current layer's GEMMs, FSDP-style) and with
 * and without asynchronous finalize (the reduce-scatter of a layer left running while the
 * previous layer's backward computes; completed at the end of the step).
 *
 *   CPU, MPI:   mpirun -np 4 build/bench/dist_overlap [options]         (self with one process)
 *   GPU:        build/bench/dist_overlap --gpu [options]   (NCCL world size 1; self without NCCL)
 *
 * Reported per combination: the median step time, and the share of the communication time that
 * the step hides: hidden = (compute + comm - step) / comm, clamped to [0, 1], where compute is
 * the same step on plain (unsharded) layers of the same shapes and comm is the group's
 * collectives alone (every materialize + release, every finalize + wait of a step, nothing
 * else).  On the CPU a non-blocking MPI collective progresses only inside MPI calls (no
 * progress thread), so prefetch mostly moves the gather rather than hiding it.
 *
 * --splits KIND: the tokens' expert counts, one of bench_util.h's sets (default uniform: an equal
 * share each, the remainder one row at a time; router: the unaligned Zipf counts a router gives,
 * the last quarter of the experts empty); the rows past E·(tokens / E) go to expert 0. */
#include "bench_util.h" /* TRY, now_s, cmp_double, xorshift, the split sets */

#ifdef GLN_HAVE_MPI
#include <mpi.h>
#endif

enum { MAX_LAYERS = 64, MAX_EXPERTS = 256 };

typedef struct opts {
    int layers, experts, hidden, iters, warmup, gpu, fp8_gather;
    int64_t tokens; /* per rank */
    bench_splits_t splits;
    gln_recipe_t recipe;
} opts_t;

typedef struct stack {
    gln_context_t *ctx;
    gln_comm_t *comm;
    int rank, size;
    opts_t o;
    gln_sharded_weights_t *sw[MAX_LAYERS];
    gln_grouped_linear_t *sharded[MAX_LAYERS], *plain[MAX_LAYERS];
    void *act[MAX_LAYERS + 1], *grad[MAX_LAYERS + 1]; /* [tokens, hidden] bf16 each */
    int64_t splits[MAX_EXPERTS];
} dstack_t;

static void *random_bf16(gln_context_t *ctx, size_t n, uint64_t seed) {
    uint16_t *h = malloc(n * 2);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) h[i] = gln_fp32_to_bf16((float)((double)(xorshift(&s) >> 11) / 9007199254740992.0 - 0.5));
    void *d = NULL;
    TRY(gln_malloc(ctx, n * 2, &d));
    TRY(gln_memcpy(ctx, d, h, n * 2, GLN_COPY_HOST_TO_BACKEND));
    free(h);
    return d;
}

static void layer_config(const opts_t *o, gln_grouped_linear_config_t *c) {
    gln_grouped_linear_config_t def = GLN_GROUPED_LINEAR_CONFIG_INIT;
    *c = def;
    c->num_experts = o->experts;
    c->in_features = o->hidden;
    c->out_features = o->hidden;
    c->bias = 0;
    c->recipe = o->recipe;
    c->path = GLN_PATH_GROUPED;
}

static void stack_build(dstack_t *s, int async) {
    const opts_t *o = &s->o;
    size_t total = (size_t)o->experts * o->hidden * o->hidden;
    float *full = malloc(total * sizeof(float));
    for (size_t i = 0; i < total; i++) full[i] = (float)((double)((i * 2654435761u) % 1000) / 1000.0 - 0.5) * 0.05f;
    for (int l = 0; l < o->layers; l++) {
        gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
        sc.num_experts = o->experts;
        sc.out_features = o->hidden;
        sc.in_features = o->hidden;
        sc.async_finalize = async;
        sc.fp8_gather = o->fp8_gather; /* the recipe's weight quantization: E4M3, current */
        TRY(gln_sharded_weights_create(s->ctx, s->comm, &sc, &s->sw[l]));
        TRY(gln_sharded_weights_load_full(s->sw[l], full));
        gln_grouped_linear_config_t c;
        layer_config(o, &c);
        c.params.distributed = gln_sharded_weights_protocol(s->sw[l]);
        TRY(gln_grouped_linear_create(s->ctx, &c, &s->sharded[l]));
    }
    free(full);
}

static void stack_drop(dstack_t *s) {
    for (int l = 0; l < s->o.layers; l++) {
        TRY(gln_grouped_linear_destroy(s->sharded[l]));
        TRY(gln_sharded_weights_destroy(s->sw[l]));
    }
}

static const gln_dist_weights_t *proto(dstack_t *s, int l) { return gln_sharded_weights_protocol(s->sw[l]); }

/* One training step through the stack; sharded = 0 runs the plain layers. */
static void step(dstack_t *s, int sharded, int prefetch) {
    const opts_t *o = &s->o;
    int L = o->layers;
    gln_grouped_linear_t **layers = sharded ? s->sharded : s->plain;
    gln_grouped_linear_saved_t *saved[MAX_LAYERS] = {0};
    for (int l = 0; l < L; l++) {
        if (sharded && prefetch && l + 1 < L) TRY(proto(s, l + 1)->prefetch(proto(s, l + 1)->impl, 0));
        gln_tensor_t x = gln_tensor_make(GLN_DTYPE_BF16, o->tokens, o->hidden, s->act[l]);
        gln_tensor_t y = gln_tensor_make(GLN_DTYPE_BF16, o->tokens, o->hidden, s->act[l + 1]);
        gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
        a.x = &x;
        a.m_splits = s->splits;
        a.y = &y;
        a.microbatch = GLN_MICROBATCH_FIRST;
        a.input_requires_grad = 1;
        TRY(gln_grouped_linear_forward(layers[l], &a, &saved[l]));
    }
    for (int l = L - 1; l >= 0; l--) {
        if (sharded && prefetch && l > 0) TRY(proto(s, l - 1)->prefetch(proto(s, l - 1)->impl, 1));
        gln_tensor_t dy = gln_tensor_make(GLN_DTYPE_BF16, o->tokens, o->hidden, s->grad[l + 1]);
        gln_tensor_t dx = gln_tensor_make(GLN_DTYPE_BF16, o->tokens, o->hidden, s->grad[l]);
        TRY(gln_grouped_linear_backward(saved[l], &dy, &dx));
        TRY(gln_grouped_linear_saved_release(saved[l]));
    }
    if (sharded)
        for (int l = 0; l < L; l++) TRY(gln_sharded_weights_wait(s->sw[l])); /* main_grad final */
    TRY(gln_synchronize(s->ctx));
}

/* The collectives of one step alone: what the layers ask of their groups, in the same order. */
static void comm_only(dstack_t *s) {
    int L = s->o.layers, n = s->o.experts;
    gln_tensor_t *w = calloc((size_t)n, sizeof *w);
    for (int l = 0; l < L; l++) {
        const gln_dist_weights_t *p = proto(s, l);
        TRY(p->materialize_forward(p->impl, w));
        TRY(p->release(p->impl, w));
    }
    for (int l = L - 1; l >= 0; l--) {
        const gln_dist_weights_t *p = proto(s, l);
        int pending = 0;
        TRY(p->materialize_backward(p->impl, w));
        TRY(p->release(p->impl, w));
        TRY(p->finalize_grads(p->impl, 0, &pending));
        TRY(p->wait(p->impl));
    }
    TRY(gln_synchronize(s->ctx));
    free(w);
}

/* Median seconds of fn over o.iters timed runs after o.warmup, the ranks started together. */
static double timed(dstack_t *s, int what, int prefetch) {
    double *t = malloc((size_t)s->o.iters * sizeof(double));
    for (int i = 0; i < s->o.warmup + s->o.iters; i++) {
        TRY(gln_comm_barrier(s->comm));
        double t0 = now_s();
        if (what == 0) step(s, 1, prefetch);
        else if (what == 1) step(s, 0, 0);
        else comm_only(s);
        double dt = now_s() - t0;
        /* the slowest rank's time is the step's */
        double mx = dt;
        if (s->size > 1) {
            int64_t ns = (int64_t)(dt * 1e9), mns = 0;
            /* the host comms (MPI) only: the GPU run is one rank */
            TRY(gln_comm_allreduce(s->comm, &ns, &mns, 1, GLN_DTYPE_INT64, GLN_REDUCE_MAX));
            mx = (double)mns * 1e-9;
        }
        if (i >= s->o.warmup) t[i - s->o.warmup] = mx;
    }
    qsort(t, (size_t)s->o.iters, sizeof *t, cmp_double);
    double m = t[s->o.iters / 2];
    free(t);
    return m;
}

/* The tokens' expert counts (see the top of the file). */
static void make_splits(const opts_t *o, int64_t *splits) {
    if (o->splits == SPLITS_UNIFORM) {
        for (int e = 0; e < o->experts; e++) splits[e] = o->tokens / o->experts + (e < o->tokens % o->experts);
        return;
    }
    bench_make_splits(o->splits, splits, o->experts, o->tokens / o->experts);
    splits[0] += o->tokens % o->experts;
}

static void usage(void) {
    fprintf(stderr,
            "usage: dist_overlap [--gpu] [--layers L] [--experts E] [--tokens T (per rank)] [--hidden H]\n"
            "                    [--recipe none|fp8-current] [--fp8-gather] [--iters N] [--warmup N]\n"
            "                    [--splits uniform|zipf|empty|router|random]\n");
    exit(2);
}

static void parse(int argc, char **argv, opts_t *o) {
    *o = (opts_t){4, 8, 512, 7, 2, 0, 0, 2048, SPLITS_UNIFORM, GLN_RECIPE_NONE};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--gpu")) o->gpu = 1;
        else if (!strcmp(a, "--fp8-gather")) o->fp8_gather = 1;
        else if (!v) usage();
        else if (!strcmp(a, "--layers")) o->layers = atoi(v), i++;
        else if (!strcmp(a, "--experts")) o->experts = atoi(v), i++;
        else if (!strcmp(a, "--tokens")) o->tokens = atoll(v), i++;
        else if (!strcmp(a, "--hidden")) o->hidden = atoi(v), i++;
        else if (!strcmp(a, "--iters")) o->iters = atoi(v), i++;
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(v), i++;
        else if (!strcmp(a, "--splits")) {
            int on[SPLITS_COUNT_];
            if (!strcmp(v, "all") || !bench_splits_parse(v, on)) usage();
            for (int k = 0; k < SPLITS_COUNT_; k++)
                if (on[k]) o->splits = (bench_splits_t)k;
            i++;
        } else if (!strcmp(a, "--recipe")) {
            if (!strcmp(v, "none")) o->recipe = GLN_RECIPE_NONE;
            else if (!strcmp(v, "fp8-current")) o->recipe = GLN_RECIPE_FP8_CURRENT;
            else usage();
            i++;
        } else usage();
    }
    if (o->layers < 1 || o->layers > MAX_LAYERS || o->experts < 1 || o->experts > MAX_EXPERTS ||
        o->tokens < o->experts || o->hidden < 1 || o->iters < 1 || o->warmup < 0)
        usage();
    if (o->fp8_gather && o->recipe != GLN_RECIPE_FP8_CURRENT) {
        fprintf(stderr, "--fp8-gather needs --recipe fp8-current\n");
        exit(2);
    }
}

static int launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int main(int argc, char **argv) {
    dstack_t *s = calloc(1, sizeof *s);
    parse(argc, argv, &s->o);
    opts_t *o = &s->o;
    int mpi = 0;
    gln_context_options_t co = GLN_CONTEXT_OPTIONS_INIT;
    if (o->gpu) co.backend = GLN_BACKEND_CUDA;
    TRY(gln_context_create(&co, &s->ctx));
    if (o->gpu) {
        if (gln_nccl_available()) {
            gln_nccl_id_t id;
            TRY(gln_nccl_id_create(&id));
            TRY(gln_comm_create_nccl(s->ctx, &id, 0, 1, &s->comm));
        } else {
            TRY(gln_comm_create_self(s->ctx, &s->comm));
        }
    } else if (launched_by_mpi()) {
#ifdef GLN_HAVE_MPI
        MPI_Init(&argc, &argv);
        mpi = 1;
        TRY(gln_comm_create_mpi(s->ctx, NULL, &s->comm));
#else
        fprintf(stderr, "dist_overlap: built without MPI\n");
        return 1;
#endif
    } else {
        TRY(gln_comm_create_self(s->ctx, &s->comm));
    }
    s->rank = gln_comm_rank(s->comm);
    s->size = gln_comm_size(s->comm);
    make_splits(o, s->splits);
    size_t act = (size_t)o->tokens * (size_t)o->hidden;
    for (int l = 0; l <= o->layers; l++) {
        s->act[l] = random_bf16(s->ctx, act, 1000u * (unsigned)s->rank + (unsigned)l);
        s->grad[l] = random_bf16(s->ctx, act, 5000u * (unsigned)s->rank + (unsigned)l);
    }
    for (int l = 0; l < o->layers; l++) {
        gln_grouped_linear_config_t c;
        layer_config(o, &c);
        TRY(gln_grouped_linear_create(s->ctx, &c, &s->plain[l]));
    }
    const char *comm_name = o->gpu ? (gln_nccl_available() ? "nccl" : "self") : mpi ? "mpi" : "self";
    if (s->rank == 0)
        printf("dist_overlap: %s, %d rank(s) over %s; %d layers of %d experts [%d x %d], %lld tokens "
               "per rank in %s splits, recipe %s%s; median of %d steps\n",
               o->gpu ? "GPU" : "CPU", s->size, comm_name, o->layers, o->experts, o->hidden, o->hidden,
               (long long)o->tokens, bench_splits_names[o->splits], o->recipe == GLN_RECIPE_NONE ? "bf16" : "fp8-current",
               o->fp8_gather ? " + FP8 all-gather" : "", o->iters);
    double compute = timed(s, 1, 0);
    if (s->rank == 0) printf("  compute only (plain layers): %9.3f ms\n", compute * 1e3);
    if (s->rank == 0) printf("  %-8s %-6s %10s %10s %8s\n", "prefetch", "async", "step ms", "comm ms", "hidden");
    for (int async = 0; async <= 1; async++) {
        stack_build(s, async);
        double comm = timed(s, 2, 0);
        for (int prefetch = 0; prefetch <= 1; prefetch++) {
            double t = timed(s, 0, prefetch);
            double hidden = comm > 0 ? (compute + comm - t) / comm : 0.0;
            if (hidden < 0) hidden = 0;
            if (hidden > 1) hidden = 1;
            if (s->rank == 0)
                printf("  %-8s %-6s %10.3f %10.3f %7.0f%%\n", prefetch ? "on" : "off", async ? "on" : "off",
                       t * 1e3, comm * 1e3, hidden * 100.0);
        }
        stack_drop(s);
    }
    for (int l = 0; l < o->layers; l++) TRY(gln_grouped_linear_destroy(s->plain[l]));
    for (int l = 0; l <= o->layers; l++) {
        TRY(gln_free(s->ctx, s->act[l]));
        TRY(gln_free(s->ctx, s->grad[l]));
    }
    TRY(gln_comm_destroy(s->comm));
    TRY(gln_context_destroy(s->ctx));
    free(s);
#ifdef GLN_HAVE_MPI
    if (mpi) MPI_Finalize();
#endif
    return 0;
}

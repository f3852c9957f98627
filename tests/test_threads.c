/* What grouplin.h promises about threads:
 *   - gln_set_log_callback may be called at any time, also while other threads' calls fail:
 *     every message reaches a callback together with its own `user`, and once the setter
 *     returns the previous callback is running nowhere and is never called again;
 *   - a callback may call into the library, also gln_set_log_callback, without deadlocking;
 *   - gln_last_error() is per thread;
 *   - contexts used from several threads at once, each thread with its own layers (its own
 *     context, or one CPU context shared), give the results of a run on one thread, bit for bit.
 * Worker threads record what they saw; the checks run on the main thread after the joins. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---------------------------------------------------------------- the log callback */

/* One (callback, user) pair.  `retired` is set by the setter once it has replaced the pair:
 * from then on the callback must not be running or be called. */
typedef struct log_user {
    char tag;
    atomic_int retired;
    atomic_long calls;
    atomic_long wrong_user;   /* the callback saw the other pair's user */
    atomic_long after_retire; /* called, or still running, after its replacement returned */
    atomic_long bad_message;
} log_user_t;

static log_user_t user_a = {.tag = 'A'}, user_b = {.tag = 'B'};

static void on_message(char want, gln_log_level_t level, const char *message, void *user) {
    log_user_t *u = user;
    if (u->tag != want) {
        atomic_fetch_add(&user_a.wrong_user, 1); /* u may be anything: count it on A */
        return;
    }
    atomic_fetch_add(&u->calls, 1);
    if (atomic_load(&u->retired)) atomic_fetch_add(&u->after_retire, 1);
    if (level != GLN_LOG_ERROR || strncmp(message, "gln_context_create: ", 20) != 0)
        atomic_fetch_add(&u->bad_message, 1);
    /* Stay a little, so that a setter which does not wait for running callbacks is caught. */
    for (volatile int i = 0; i < 200; i++) {
    }
    if (atomic_load(&u->retired)) atomic_fetch_add(&u->after_retire, 1);
}
static void log_a(gln_log_level_t level, const char *message, void *user) { on_message('A', level, message, user); }
static void log_b(gln_log_level_t level, const char *message, void *user) { on_message('B', level, message, user); }

enum { FAILERS = 3, SWITCHES = 1000 };
static atomic_int stop_failing;
static pthread_barrier_t start; /* the switching begins once every failing thread runs */

typedef struct failer {
    int id;
    long calls, wrong_status, wrong_message;
} failer_t;

/* Failing calls whose message carries this thread's own number: also checks that
 * gln_last_error() is per thread while the other threads fail with other numbers. */
static void *fail_repeatedly(void *arg) {
    failer_t *f = arg;
    char want[64];
    snprintf(want, sizeof want, "options->num_threads %d must be >= 0", -1000 - f->id);
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.num_threads = -1000 - f->id;
    pthread_barrier_wait(&start);
    while (!atomic_load(&stop_failing)) {
        gln_context_t *ctx = NULL;
        if (gln_context_create(&o, &ctx) != GLN_STATUS_INVALID_ARGUMENT || ctx != NULL) f->wrong_status++;
        if (strstr(gln_last_error(), want) == NULL) f->wrong_message++;
        f->calls++;
    }
    return NULL;
}

/* Until `u` got a message (or a while passed): the switch then meets callbacks that run. */
static void await_a_call(log_user_t *u) {
    const long before = atomic_load(&u->calls);
    for (int i = 0; i < 1000 && atomic_load(&u->calls) == before; i++) sched_yield();
}

static void *switch_callbacks(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < SWITCHES; i++) {
        atomic_store(&user_a.retired, 0);
        gln_set_log_callback(log_a, &user_a);
        await_a_call(&user_a);
        atomic_store(&user_b.retired, 0);
        gln_set_log_callback(log_b, &user_b);
        atomic_store(&user_a.retired, 1);
        await_a_call(&user_b);
        gln_set_log_callback(NULL, NULL);
        atomic_store(&user_b.retired, 1);
    }
    atomic_store(&stop_failing, 1);
    return NULL;
}

static void test_log_callback_while_calls_fail(void) {
    pthread_t setter, failers[FAILERS];
    failer_t f[FAILERS];
    memset(f, 0, sizeof f);
    atomic_store(&stop_failing, 0);
    CHECK(pthread_barrier_init(&start, NULL, FAILERS + 1) == 0);
    for (int t = 0; t < FAILERS; t++) {
        f[t].id = t;
        CHECK(pthread_create(&failers[t], NULL, fail_repeatedly, &f[t]) == 0);
    }
    CHECK(pthread_create(&setter, NULL, switch_callbacks, NULL) == 0);
    pthread_join(setter, NULL);
    for (int t = 0; t < FAILERS; t++) pthread_join(failers[t], NULL);
    pthread_barrier_destroy(&start);

    for (int t = 0; t < FAILERS; t++) {
        CHECK_MSG(f[t].wrong_status == 0, "thread %d: %ld of %ld calls did not fail as expected", t,
                  f[t].wrong_status, f[t].calls);
        CHECK_MSG(f[t].wrong_message == 0, "thread %d: %ld of %ld last errors were another thread's", t,
                  f[t].wrong_message, f[t].calls);
    }
    const log_user_t *users[2] = {&user_a, &user_b};
    for (int u = 0; u < 2; u++) {
        CHECK_MSG(atomic_load(&users[u]->calls) > 0, "callback %c was never called (the test proves nothing)",
                  users[u]->tag);
        CHECK_MSG(atomic_load(&users[u]->after_retire) == 0,
                  "callback %c ran %ld times after gln_set_log_callback had replaced it", users[u]->tag,
                  atomic_load(&users[u]->after_retire));
        CHECK_MSG(atomic_load(&users[u]->bad_message) == 0, "callback %c got %ld unexpected messages",
                  users[u]->tag, atomic_load(&users[u]->bad_message));
    }
    CHECK_MSG(atomic_load(&user_a.wrong_user) == 0, "%ld messages reached a callback with the other's user",
              atomic_load(&user_a.wrong_user));
    printf("  %ld + %ld messages delivered during %d switches; failed calls %ld %ld %ld\n",
           atomic_load(&user_a.calls), atomic_load(&user_b.calls), SWITCHES, f[0].calls, f[1].calls,
           f[2].calls);

    /* Cleared: a failing call reaches no callback. */
    const long before = atomic_load(&user_a.calls) + atomic_load(&user_b.calls);
    CHECK_STATUS(gln_malloc(NULL, 1, NULL), GLN_STATUS_INVALID_ARGUMENT, "gln_malloc");
    CHECK(atomic_load(&user_a.calls) + atomic_load(&user_b.calls) == before);
}

/* A callback that fails a call itself (re-entering) and clears the callback from inside. */
typedef struct reentry {
    int outer, inner;
    char inner_message[256], outer_message_after[256];
} reentry_t;

static void log_reenter(gln_log_level_t level, const char *message, void *user) {
    (void)level;
    reentry_t *r = user;
    if (strncmp(message, "gln_free: ", 10) == 0) {
        r->inner++;
        snprintf(r->inner_message, sizeof r->inner_message, "%s", message);
        return;
    }
    r->outer++;
    (void)gln_free(NULL, NULL); /* fails: re-enters this callback */
    snprintf(r->outer_message_after, sizeof r->outer_message_after, "%s", message);
    gln_set_log_callback(NULL, NULL);
}

static void test_log_callback_reentry(void) {
    reentry_t r;
    memset(&r, 0, sizeof r);
    gln_set_log_callback(log_reenter, &r);
    /* (The failure inside the callback is now this thread's last error.) */
    CHECK_STATUS(gln_malloc(NULL, 1, NULL), GLN_STATUS_INVALID_ARGUMENT, "gln_free");
    CHECK(r.outer == 1);
    CHECK(r.inner == 1);
    CHECK_MSG(strstr(r.inner_message, "ctx must not be NULL") != NULL, "inner message '%s'", r.inner_message);
    /* The outer callback's message is its own, also after the inner failure. */
    CHECK_MSG(strncmp(r.outer_message_after, "gln_malloc: ", 12) == 0, "outer message became '%s'",
              r.outer_message_after);
    /* The clear asked for inside the callback took effect when it returned. */
    CHECK_STATUS(gln_malloc(NULL, 1, NULL), GLN_STATUS_INVALID_ARGUMENT, "gln_malloc");
    CHECK(r.outer == 1 && r.inner == 1);
    gln_set_log_callback(NULL, NULL);
}

/* ---------------------------------------------------------------- gln_last_error per thread */

static void *fail_once(void *arg) {
    (void)arg;
    (void)gln_free(NULL, NULL);
    return strstr(gln_last_error(), "gln_free") ? (void *)1 : NULL;
}

static void test_last_error_per_thread(void) {
    CHECK_STATUS(gln_malloc(NULL, 1, NULL), GLN_STATUS_INVALID_ARGUMENT, "gln_malloc");
    pthread_t t;
    void *other_saw_its_own = NULL;
    CHECK(pthread_create(&t, NULL, fail_once, NULL) == 0);
    pthread_join(t, &other_saw_its_own);
    CHECK(other_saw_its_own != NULL);
    CHECK_MSG(strncmp(gln_last_error(), "gln_malloc: ", 12) == 0,
              "this thread's last error became '%s' after another thread failed", gln_last_error());
    gln_clear_error();
    CHECK(gln_last_error()[0] == '\0');
}

/* ---------------------------------------------------------------- contexts on several threads */

enum { E = 3, KIN = 96, KOUT = 64, ROWS = 80, STEPS = 4, LAYER_THREADS = 3 };

typedef struct layer_run {
    gln_context_t *ctx;   /* NULL: the thread creates (and destroys) its own */
    gln_recipe_t recipe;
    uint16_t y[ROWS * KOUT], dx[ROWS * KIN];
    gln_status_t st;
    char error[256];
} layer_run_t;

/* A layer of its own on r->ctx: STEPS forward + backward passes (delayed scaling changes the
 * layer's state every step), the last step's y and dx kept. */
static void *run_layer(void *arg) {
    layer_run_t *r = arg;
    gln_context_t *own = NULL, *ctx = r->ctx;
    gln_grouped_linear_t *layer = NULL;
    gln_grouped_linear_saved_t *saved = NULL;
    uint16_t x[ROWS * KIN], dy[ROWS * KOUT];
    gln_rng_t rng = gln_rng_seed(7);
    for (int i = 0; i < ROWS * KIN; i++) x[i] = gln_fp32_to_bf16((float)gln_rng_normal(&rng));
    for (int i = 0; i < ROWS * KOUT; i++) dy[i] = gln_fp32_to_bf16((float)gln_rng_normal(&rng));
    const int64_t splits[E] = {37, 0, ROWS - 37};
    gln_status_t st = ctx ? GLN_STATUS_SUCCESS : gln_context_create(NULL, &own);
    if (!ctx) ctx = own;
    gln_grouped_linear_config_t cfg = GLN_GROUPED_LINEAR_CONFIG_INIT;
    cfg.num_experts = E;
    cfg.in_features = KIN;
    cfg.out_features = KOUT;
    cfg.recipe = r->recipe;
    if (st == GLN_STATUS_SUCCESS) st = gln_grouped_linear_create(ctx, &cfg, &layer);
    for (int s = 0; s < STEPS && st == GLN_STATUS_SUCCESS; s++) {
        gln_tensor_t tx = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KIN, x);
        gln_tensor_t ty = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KOUT, r->y);
        gln_tensor_t tdy = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KOUT, dy);
        gln_tensor_t tdx = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KIN, r->dx);
        gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
        fa.x = &tx;
        fa.m_splits = splits;
        fa.y = &ty;
        st = gln_grouped_linear_forward(layer, &fa, &saved);
        if (st == GLN_STATUS_SUCCESS) st = gln_grouped_linear_backward(saved, &tdy, &tdx);
        if (saved) gln_grouped_linear_saved_release(saved);
        saved = NULL;
    }
    r->st = st;
    snprintf(r->error, sizeof r->error, "%s", st == GLN_STATUS_SUCCESS ? "" : gln_last_error());
    gln_grouped_linear_destroy(layer);
    gln_context_destroy(own);
    return NULL;
}

static void check_concurrent_layers(gln_context_t *shared, gln_recipe_t recipe, const char *what) {
    static layer_run_t ref, runs[LAYER_THREADS];
    memset(&ref, 0, sizeof ref);
    ref.ctx = gln_test_cpu_context();
    ref.recipe = recipe;
    run_layer(&ref); /* one thread, alone */
    CHECK_MSG(ref.st == GLN_STATUS_SUCCESS, "%s: reference run: %s", what, ref.error);
    pthread_t t[LAYER_THREADS];
    for (int i = 0; i < LAYER_THREADS; i++) {
        memset(&runs[i], 0, sizeof runs[i]);
        runs[i].ctx = shared;
        runs[i].recipe = recipe;
        CHECK(pthread_create(&t[i], NULL, run_layer, &runs[i]) == 0);
    }
    for (int i = 0; i < LAYER_THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < LAYER_THREADS; i++) {
        CHECK_MSG(runs[i].st == GLN_STATUS_SUCCESS, "%s, thread %d: %s", what, i, runs[i].error);
        gln_check_bitwise(what, runs[i].y, ref.y, sizeof ref.y);
        gln_check_bitwise(what, runs[i].dx, ref.dx, sizeof ref.dx);
    }
}

static void test_contexts_on_threads(void) {
    static const gln_recipe_t recipes[] = {GLN_RECIPE_NONE, GLN_RECIPE_FP8_DELAYED, GLN_RECIPE_MXFP8};
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s, a context per thread", gln_recipe_name(recipes[i]));
        check_concurrent_layers(NULL, recipes[i], what);
        gln_context_t *shared = NULL;
        gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
        o.num_threads = 2; /* the shared context's own worker threads run beside the callers' */
        CHECK_OK(gln_context_create(&o, &shared));
        snprintf(what, sizeof what, "%s, one cpu context shared", gln_recipe_name(recipes[i]));
        if (shared) check_concurrent_layers(shared, recipes[i], what);
        gln_context_destroy(shared);
    }
}

GLN_TEST_MAIN(GLN_CASE(test_log_callback_while_calls_fail), GLN_CASE(test_log_callback_reentry),
              GLN_CASE(test_last_error_per_thread), GLN_CASE(test_contexts_on_threads))

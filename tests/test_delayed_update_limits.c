/* gln_delayed_scaling_update(_ex)'s argument checks: the history [history_len][num_slots] held
 * to GLN_MAX_ELEMS (a state of 2^62 elements was accepted and walked past the caller's buffer),
 * the option flags 0 or 1, and nothing written by a refused call (the state is poisoned and
 * compared byte for byte; guarded buffers catch a read or write past the end). */
#include <string.h>

#include "harness.h"

enum { SLOTS = 3, LEN = 4 };

typedef struct state {
    float *hist, *scale, *fp8_max;
    float hist0[SLOTS * LEN], scale0[SLOTS];
} state_t;

static void state_make(state_t *s) {
    s->hist = gln_test_alloc(sizeof(float) * SLOTS * LEN);
    s->scale = gln_test_alloc(sizeof(float) * SLOTS);
    s->fp8_max = gln_test_alloc(sizeof(float) * SLOTS);
    for (int i = 0; i < SLOTS * LEN; i++) s->hist[i] = (float)(i % 5 + 1);
    for (int k = 0; k < SLOTS; k++) s->scale[k] = 2.0f, s->fp8_max[k] = 448.0f;
    memcpy(s->hist0, s->hist, sizeof s->hist0);
    memcpy(s->scale0, s->scale, sizeof s->scale0);
}

/* The refused call changed nothing and stayed inside the buffers. */
static void state_check_free(state_t *s, const char *what) {
    CHECK_MSG(memcmp(s->hist, s->hist0, sizeof s->hist0) == 0, "%s: history written", what);
    CHECK_MSG(memcmp(s->scale, s->scale0, sizeof s->scale0) == 0, "%s: scale written", what);
    CHECK(gln_guard_ok(s->hist) && gln_guard_ok(s->scale) && gln_guard_ok(s->fp8_max));
    gln_test_free(s->hist);
    gln_test_free(s->scale);
    gln_test_free(s->fp8_max);
}

static void test_state_size_limit(void) {
    /* 2^31 - 1 squared is about 2^62 elements; the checks must refuse before touching fp8_max
     * past its SLOTS entries or the history past its SLOTS * LEN */
    const int32_t big = INT32_MAX;
    struct {
        int32_t slots, len;
    } cases[] = {{big, big}, {1 << 28, 1 << 29}, {(1 << 28) + 1, 1 << 28}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        state_t s;
        state_make(&s);
        CHECK_STATUS(gln_delayed_scaling_update(cases[i].slots, cases[i].len, s.hist, s.scale, s.fp8_max, 0,
                                                GLN_AMAX_ALGO_MAX),
                     GLN_STATUS_INVALID_ARGUMENT, "GLN_MAX_ELEMS");
        CHECK_STATUS(gln_delayed_scaling_update_ex(cases[i].slots, cases[i].len, s.hist, s.scale, s.fp8_max,
                                                   0, GLN_AMAX_ALGO_MOST_RECENT, NULL),
                     GLN_STATUS_INVALID_ARGUMENT, "history_len");
        state_check_free(&s, "oversized state");
    }
}

static void test_option_flags(void) {
    const int bad[] = {2, -1, 7, INT32_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        state_t s;
        state_make(&s);
        gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
        o.always_roll = bad[i];
        CHECK_STATUS(gln_delayed_scaling_update_ex(SLOTS, LEN, s.hist, s.scale, s.fp8_max, 0, GLN_AMAX_ALGO_MAX,
                                                   &o),
                     GLN_STATUS_INVALID_ARGUMENT, "opts->always_roll");
        o = (gln_delayed_update_options_t)GLN_DELAYED_UPDATE_OPTIONS_INIT;
        o.amax_nan_propagate = bad[i];
        CHECK_STATUS(gln_delayed_scaling_update_ex(SLOTS, LEN, s.hist, s.scale, s.fp8_max, 0, GLN_AMAX_ALGO_MAX,
                                                   &o),
                     GLN_STATUS_INVALID_ARGUMENT, "opts->amax_nan_propagate");
        state_check_free(&s, "bad flag");
    }
}

/* The valid edges still run: every flag value, the largest margin. */
static void test_valid_calls(void) {
    for (int roll = 0; roll <= 1; roll++)
        for (int nan = 0; nan <= 1; nan++) {
            state_t s;
            state_make(&s);
            gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
            o.always_roll = roll;
            o.amax_nan_propagate = nan;
            CHECK_OK(gln_delayed_scaling_update_ex(SLOTS, LEN, s.hist, s.scale, s.fp8_max, 126,
                                                   GLN_AMAX_ALGO_MAX, &o));
            /* slot 0's window is {1, 4, 2, 5} (i % 5 + 1 down column 0): amax 5, rolled */
            CHECK(s.hist[0] == 0.0f);
            CHECK(gln_guard_ok(s.hist) && gln_guard_ok(s.scale) && gln_guard_ok(s.fp8_max));
            gln_test_free(s.hist);
            gln_test_free(s.scale);
            gln_test_free(s.fp8_max);
        }
}

GLN_TEST_MAIN(GLN_CASE(test_state_size_limit), GLN_CASE(test_option_flags), GLN_CASE(test_valid_calls))

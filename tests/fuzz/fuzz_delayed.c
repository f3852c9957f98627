/* Fuzz harness 6: the delayed-scaling update, gln_delayed_scaling_update and _ex.
 *
 * Promises checked beyond "no memory error, no UB, no leak":
 *   - refused (INVALID_ARGUMENT, nothing written) exactly when an argument is out of range:
 *     num_slots or history_len < 1, history_len·num_slots > GLN_MAX_ELEMS, margin outside
 *     [-126, 126], algo not MAX / MOST_RECENT, an fp8_max not finite and > 0, a NULL pointer,
 *     opts of an unknown size or with always_roll / amax_nan_propagate not 0 or 1;
 *   - accepted, the state equals this harness's own model of the header's rule bit for bit:
 *     a slot whose newest amax is 0 is untouched (unless always_roll); otherwise the window's
 *     amax (max over the window, NaN ignored or propagated, or the newest), the roll with row 0
 *     zeroed, and scale = fp8_max·2^-margin / amax when amax is finite and > 0 (FLT_MAX when that
 *     overflows), else kept.
 * Wild sizes are drawn only in combinations that must be refused (the buffers are the sizes the
 * harness allocates, exact, so a read past them is a finding). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "fuzz.h"

enum { MAX_SLOTS = 12, MAX_LEN = 9 };

static float max_rule(float a, float b, int nan_propagate) {
    if (isnan(a)) return nan_propagate ? a : b;
    if (isnan(b)) return nan_propagate ? b : a;
    return a > b ? a : b;
}

/* The model: the header's rule, written from its text. */
static void model(int32_t slots, int32_t len, float *h, float *scale, const float *fmax, int margin,
                  gln_amax_algo_t algo, int always_roll, int nan_propagate) {
    const float p = ldexpf(1.0f, -margin);
    for (int32_t k = 0; k < slots; k++) {
        if (!always_roll && h[k] == 0.0f) continue;
        float amax = h[k];
        if (algo == GLN_AMAX_ALGO_MAX)
            for (int32_t i = 1; i < len; i++) amax = max_rule(amax, h[(size_t)i * slots + k], nan_propagate);
        float first = h[k];
        for (int32_t i = 0; i + 1 < len; i++) h[(size_t)i * slots + k] = h[(size_t)(i + 1) * slots + k];
        h[(size_t)(len - 1) * slots + k] = first;
        h[k] = 0.0f;
        if (isfinite(amax) && amax > 0.0f) {
            float s = fmax[k] * p / amax;
            scale[k] = isinf(s) ? FLT_MAX : s;
        }
    }
}

/* Sizes: tame, or (wild) a pair the call must refuse without reading the buffers. */
static void draw_sizes(fz_t *f, int32_t *slots, int32_t *len, int *bad) {
    *slots = (int32_t)fz_int(f, 1, MAX_SLOTS);
    *len = (int32_t)fz_int(f, 1, MAX_LEN);
    if (!f->wild || fz_u8(f) < 0xe0) return;
    static const int32_t NONPOS[] = {0, -1, INT32_MIN};
    static const int32_t HUGE[] = {INT32_MAX, (1 << 28) + 1, 1 << 29, 1 << 30};
    *bad = 1;
    switch (fz_pick(f, 3)) {
    case 0: *slots = NONPOS[fz_pick(f, 3)]; break;
    case 1: *len = NONPOS[fz_pick(f, 3)]; break;
    default: /* both at least 2^28 + 1: the product passes 2^56 */
        *slots = HUGE[fz_pick(f, 4)];
        *len = HUGE[fz_pick(f, 4)];
        break;
    }
}

static float draw_history(fz_t *f) {
    switch (fz_pick(f, 8)) {
    case 0: return 0.0f;
    case 1: return f->specials ? NAN : 1.0f;
    case 2: return f->specials ? INFINITY : 2.0f;
    case 3: return ldexpf(1.0f, (int)fz_int(f, -140, 127)); /* denormal .. near overflow */
    default: return fabsf(fz_value(f));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_t f = fz_begin(data, size);
    int bad = 0;
    int32_t slots, len;
    draw_sizes(&f, &slots, &len, &bad);
    const int wild_sizes = bad;
    size_t tame_slots = wild_sizes ? 4 : (size_t)slots, tame_len = wild_sizes ? 2 : (size_t)len;
    float *h = fz_alloc(&f, tame_slots * tame_len * sizeof(float));
    float *scale = fz_alloc(&f, tame_slots * sizeof(float));
    float *fmax = fz_alloc(&f, tame_slots * sizeof(float));
    for (size_t i = 0; i < tame_slots * tame_len; i++) h[i] = draw_history(&f);
    for (size_t k = 0; k < tame_slots; k++) {
        scale[k] = ldexpf(1.0f, (int)fz_int(&f, -4, 4));
        fmax[k] = fz_pick(&f, 8) ? (fz_bool(&f) ? 448.0f : 57344.0f) : draw_history(&f);
        if (!wild_sizes && !(isfinite(fmax[k]) && fmax[k] > 0.0f)) bad = 1;
    }
    int margin = (int)fz_int(&f, -130, 130);
    gln_amax_algo_t algo = (gln_amax_algo_t)fz_int(&f, -1, 2);
    bad |= margin < -126 || margin > 126 || (algo != GLN_AMAX_ALGO_MAX && algo != GLN_AMAX_ALGO_MOST_RECENT);
    int nulls = fz_pick(&f, 16); /* 1..3: one pointer NULL */
    bad |= nulls >= 1 && nulls <= 3;

    gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    int use_ex = fz_bool(&f), use_opts = use_ex && fz_bool(&f);
    if (use_opts) {
        o.always_roll = fz_pick(&f, 8) ? fz_bool(&f) : (int)(int8_t)fz_u8(&f);
        o.amax_nan_propagate = fz_pick(&f, 8) ? fz_bool(&f) : (int)(int8_t)fz_u8(&f);
        if (fz_pick(&f, 16) == 0) o.size -= 4;
        bad |= o.size != sizeof o || (unsigned)o.always_roll > 1 || (unsigned)o.amax_nan_propagate > 1;
    }

    float *h_want = fz_alloc(&f, tame_slots * tame_len * sizeof(float));
    float *s_want = fz_alloc(&f, tame_slots * sizeof(float));
    memcpy(h_want, h, tame_slots * tame_len * sizeof(float));
    memcpy(s_want, scale, tame_slots * sizeof(float));

    float *ph = nulls == 1 ? NULL : h, *ps = nulls == 2 ? NULL : scale, *pm = nulls == 3 ? NULL : fmax;
    gln_status_t st = use_ex ? gln_delayed_scaling_update_ex(slots, len, ph, ps, pm, margin, algo,
                                                             use_opts ? &o : NULL)
                             : gln_delayed_scaling_update(slots, len, ph, ps, pm, margin, algo);
    fz_status(st, "gln_delayed_scaling_update");
    if (bad) {
        FZ_ASSERT(st == GLN_STATUS_INVALID_ARGUMENT, "accepted an invalid argument (slots %d len %d margin %d "
                  "algo %d nulls %d opts %d): %s", (int)slots, (int)len, margin, (int)algo, nulls, use_opts,
                  gln_status_string(st));
    } else {
        FZ_ASSERT(st == GLN_STATUS_SUCCESS, "refused valid arguments: %s", gln_last_error());
        model(slots, len, h_want, s_want, fmax, margin, algo, use_opts && o.always_roll,
              use_opts && o.amax_nan_propagate);
    }
    /* refused: nothing written; accepted: the model's state, bit for bit */
    FZ_ASSERT(memcmp(h, h_want, tame_slots * tame_len * sizeof(float)) == 0, "amax history differs (%s)",
              bad ? "written by a refused call" : "from the model");
    FZ_ASSERT(memcmp(scale, s_want, tame_slots * sizeof(float)) == 0, "scale differs (%s)",
              bad ? "written by a refused call" : "from the model");
    fz_free_all();
    return 0;
}

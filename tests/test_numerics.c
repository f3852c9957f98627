/* Scalar numerics: bf16 / fp16 / FP8 / E8M0 conversions and the per-tensor scale rule, checked
 * against float64 references built from the format definitions (brute-force nearest value,
 * ldexp powers of two), never against the library's own output. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "harness.h"

static uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float float_of(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Value of a binary format code from its definition: sign, `eb` exponent bits (bias), `mb`
 * mantissa bits; `ieee` = the all-ones exponent is Inf/NaN; E4M3 (ieee 0) has NaN S.1111.111. */
static double format_value(uint32_t code, int eb, int mb, int ieee) {
    int sign = (code >> (eb + mb)) & 1;
    int e = (int)((code >> mb) & ((1u << eb) - 1));
    int m = (int)(code & ((1u << mb) - 1));
    int bias = (1 << (eb - 1)) - 1;
    int emax = (1 << eb) - 1;
    double v;
    if (ieee && e == emax)
        v = m ? NAN : INFINITY;
    else if (!ieee && e == emax && m == (1 << mb) - 1)
        v = NAN;
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - mb);
    else
        v = ldexp(1.0 + ldexp((double)m, -mb), e - bias);
    return sign ? -v : v;
}

static double e4m3_value(uint32_t c) { return format_value(c, 4, 3, 0); }
static double e5m2_value(uint32_t c) { return format_value(c, 5, 2, 1); }

/* Nearest code (ties to the even code) among the finite non-negative codes of an 8-bit FP8
 * format, with saturation: the reference encoder for |x|. */
static uint8_t fp8_nearest_ref(double x, gln_dtype_t fmt) {
    double maxv = fmt == GLN_DTYPE_FP8_E4M3 ? 448.0 : 57344.0;
    int sign = signbit(x) ? 0x80 : 0;
    double a = fabs(x);
    if (isnan(x)) return (uint8_t)(sign | 0x7F);
    if (a >= maxv) return (uint8_t)(sign | (fmt == GLN_DTYPE_FP8_E4M3 ? 0x7E : 0x7B));
    int best = 0;
    double bestd = INFINITY;
    for (int c = 0; c < 0x80; c++) {
        double v = fmt == GLN_DTYPE_FP8_E4M3 ? e4m3_value((uint32_t)c) : e5m2_value((uint32_t)c);
        if (!isfinite(v)) continue;
        double d = fabs(v - a);
        if (d < bestd || (d == bestd && (c & 1) == 0)) {
            bestd = d;
            best = c;
        }
    }
    return (uint8_t)(sign | best);
}

static void test_dtype_basics(void) {
    CHECK(gln_dtype_size(GLN_DTYPE_FP32) == 4 && gln_dtype_size(GLN_DTYPE_BF16) == 2);
    CHECK(gln_dtype_size(GLN_DTYPE_FP16) == 2 && gln_dtype_size(GLN_DTYPE_FP8_E4M3) == 1);
    CHECK(gln_dtype_size(GLN_DTYPE_FP8_E5M2) == 1 && gln_dtype_size(GLN_DTYPE_E8M0) == 1);
    CHECK(gln_dtype_size(GLN_DTYPE_INT32) == 4 && gln_dtype_size(GLN_DTYPE_INT64) == 8);
    CHECK(gln_dtype_size(GLN_DTYPE_COUNT_) == 0 && gln_dtype_size((gln_dtype_t)-1) == 0);
    CHECK(strcmp(gln_dtype_name(GLN_DTYPE_BF16), "bf16") == 0);
    CHECK(strcmp(gln_dtype_name(GLN_DTYPE_FP8_E5M2), "fp8_e5m2") == 0);
    CHECK(strcmp(gln_dtype_name((gln_dtype_t)42), "invalid") == 0);
    CHECK(gln_dtype_is_fp8(GLN_DTYPE_FP8_E4M3) && gln_dtype_is_fp8(GLN_DTYPE_FP8_E5M2));
    CHECK(!gln_dtype_is_fp8(GLN_DTYPE_E8M0) && !gln_dtype_is_fp8(GLN_DTYPE_BF16));
    CHECK(gln_fp8_max(GLN_DTYPE_FP8_E4M3) == 448.0f && gln_fp8_max(GLN_DTYPE_FP8_E5M2) == 57344.0f);
    CHECK(gln_fp8_max(GLN_DTYPE_FP32) == 0.0f);
}

/* Every 16-bit pattern decodes to its defined value; encoding that value gives it back. */
static void test_half_formats_all_patterns(void) {
    int bad = 0;
    for (uint32_t p = 0; p < 65536; p++) {
        double bv = format_value(p, 8, 7, 1), hv = format_value(p, 5, 10, 1);
        float b = gln_bf16_to_fp32((uint16_t)p), h = gln_fp16_to_fp32((uint16_t)p);
        if (isnan(bv) ? !isnan(b) : (double)b != bv || !signbit(b) != !signbit(bv)) bad++;
        if (isnan(hv) ? !isnan(h) : (double)h != hv || !signbit(h) != !signbit(hv)) bad++;
        if (!isnan(bv) && gln_fp32_to_bf16(b) != p) bad++;
        if (!isnan(hv) && gln_fp32_to_fp16(h) != p) bad++;
        if (isnan(bv) && (gln_fp32_to_bf16(b) & 0x7FC0) != 0x7FC0) bad++; /* NaN stays (quiet) NaN */
        if (isnan(hv) && (gln_fp32_to_fp16(h) & 0x7E00) != 0x7E00) bad++;
    }
    CHECK_MSG(bad == 0, "%d bf16/fp16 pattern mismatches", bad);
}

/* Nearest-even rounding: the encoded value is at least as close as both neighbours, and a tie
 * picks the even code.  Random FP32 inputs of every exponent. */
static void check_rne16(const char *what, float x, uint16_t r, int eb, int mb) {
    if (isnan(x)) return;
    double v = format_value(r, eb, mb, 1);
    double maxv = format_value((uint32_t)(((1u << eb) - 2) << mb | ((1u << mb) - 1)), eb, mb, 1);
    if (isinf(v)) {
        /* overflow: |x| must be at least halfway between max and the next power step */
        double lim = maxv + ldexp(1.0, (1 << (eb - 1)) - 1 - mb - 1);
        CHECK_MSG(fabs((double)x) >= lim && !signbit(v) == !signbit(x), "%s(%a) -> Inf", what, (double)x);
        return;
    }
    double d = fabs(v - (double)x);
    for (int k = -1; k <= 1; k += 2) {
        uint32_t mag = r & 0x7FFFu;
        if (k < 0 && mag == 0) continue;
        uint32_t n = (r & 0x8000u) | (mag + (uint32_t)k);
        double nv = format_value(n, eb, mb, 1);
        if (isnan(nv)) continue;
        double nd = isinf(nv) ? INFINITY : fabs(nv - (double)x);
        CHECK_MSG(d < nd || (d == nd && (r & 1) == 0), "%s(%a) -> 0x%04x not nearest-even", what, (double)x,
                  r);
    }
}

static void test_half_formats_rounding(void) {
    gln_rng_t rng = gln_rng_seed(11);
    for (int i = 0; i < 200000; i++) {
        float x = float_of((uint32_t)gln_rng_u64(&rng));
        /* every other input in and around the fp16 range (exponents 2^-27 .. 2^32) */
        if (i & 1) x = float_of((bits_of(x) & 0x807FFFFFu) | ((uint32_t)(100 + i % 60) << 23));
        check_rne16("fp32_to_bf16", x, gln_fp32_to_bf16(x), 8, 7);
        check_rne16("fp32_to_fp16", x, gln_fp32_to_fp16(x), 5, 10);
    }
    /* named edges */
    CHECK(gln_fp32_to_fp16(65504.0f) == 0x7BFF);
    CHECK(gln_fp32_to_fp16(65519.99f) == 0x7BFF);
    CHECK(gln_fp32_to_fp16(65520.0f) == 0x7C00); /* tie rounds to even = Inf (IEEE) */
    CHECK(gln_fp32_to_fp16(-INFINITY) == 0xFC00);
    CHECK(gln_fp32_to_fp16(ldexpf(1.0f, -24)) == 0x0001);
    CHECK(gln_fp32_to_fp16(ldexpf(1.0f, -25)) == 0x0000); /* tie to even 0 */
    CHECK(gln_fp32_to_fp16(ldexpf(1.5f, -25)) == 0x0001);
    CHECK(gln_fp32_to_fp16(ldexpf(3.0f, -25)) == 0x0002); /* 1.5 ulp: tie to 2 */
    CHECK(gln_fp32_to_bf16(1.0f) == 0x3F80 && gln_fp32_to_bf16(-0.0f) == 0x8000);
    CHECK(gln_fp32_to_bf16(float_of(0x3F808000u)) == 0x3F80); /* tie to even */
    CHECK(gln_fp32_to_bf16(float_of(0x3F818000u)) == 0x3F82);
    CHECK(gln_fp32_to_bf16(FLT_MAX) == 0x7F80); /* rounds past 0x1.FEp127 */
    CHECK(gln_fp32_to_bf16(float_of(0x00000001u)) == 0x0000);
    CHECK(gln_fp32_to_bf16(-NAN) >> 15 == 1 && (gln_fp32_to_bf16(-NAN) & 0x7FC0) == 0x7FC0);
}

static void test_fp8_decode_all_codes(void) {
    for (uint32_t c = 0; c < 256; c++) {
        double v4 = e4m3_value(c), v5 = e5m2_value(c);
        float g4 = gln_fp8_to_fp32((uint8_t)c, GLN_DTYPE_FP8_E4M3);
        float g5 = gln_fp8_to_fp32((uint8_t)c, GLN_DTYPE_FP8_E5M2);
        CHECK_MSG(isnan(v4) ? isnan(g4) : (double)g4 == v4 && !signbit(g4) == !signbit(v4), "e4m3 0x%02x", c);
        CHECK_MSG(isnan(v5) ? isnan(g5) : (double)g5 == v5 && !signbit(g5) == !signbit(v5), "e5m2 0x%02x", c);
    }
    CHECK(gln_fp8_to_fp32(0x7E, GLN_DTYPE_FP8_E4M3) == 448.0f);
    CHECK(gln_fp8_to_fp32(0x01, GLN_DTYPE_FP8_E4M3) == ldexpf(1.0f, -9));
    CHECK(gln_fp8_to_fp32(0x7B, GLN_DTYPE_FP8_E5M2) == 57344.0f);
    CHECK(isinf(gln_fp8_to_fp32(0x7C, GLN_DTYPE_FP8_E5M2)));
    CHECK(gln_fp8_to_fp32(0x01, GLN_DTYPE_FP8_E5M2) == ldexpf(1.0f, -16));
}

static void test_fp8_encode(void) {
    static const gln_dtype_t fmts[2] = {GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E5M2};
    gln_rng_t rng = gln_rng_seed(12);
    int bad = 0;
    for (int f = 0; f < 2; f++) {
        gln_dtype_t fmt = fmts[f];
        /* every finite code, and every midpoint between neighbours (ties to even) */
        for (uint32_t c = 0; c < 256; c++) {
            double v = fmt == GLN_DTYPE_FP8_E4M3 ? e4m3_value(c) : e5m2_value(c);
            if (!isfinite(v)) continue;
            if (gln_fp32_to_fp8((float)v, fmt) != c) bad++;
            double n = fmt == GLN_DTYPE_FP8_E4M3 ? e4m3_value(c + 1) : e5m2_value(c + 1);
            if ((c & 0x7F) < 0x7F && isfinite(n)) {
                float mid = (float)((v + n) / 2); /* exact in FP32 */
                if (gln_fp32_to_fp8(mid, fmt) != fp8_nearest_ref(mid, fmt)) bad++;
                if (gln_fp32_to_fp8(nextafterf(mid, 0.0f), fmt) !=
                    fp8_nearest_ref(nextafterf(mid, 0.0f), fmt))
                    bad++;
            }
        }
        for (int i = 0; i < 100000; i++) {
            float x = float_of((uint32_t)gln_rng_u64(&rng));
            x = float_of((bits_of(x) & 0x807FFFFFu) | ((uint32_t)(100 + i % 50) << 23));
            if (gln_fp32_to_fp8(x, fmt) != fp8_nearest_ref(x, fmt)) bad++;
        }
        uint8_t maxc = fmt == GLN_DTYPE_FP8_E4M3 ? 0x7E : 0x7B;
        CHECK(gln_fp32_to_fp8(INFINITY, fmt) == maxc && gln_fp32_to_fp8(-INFINITY, fmt) == (0x80 | maxc));
        CHECK(gln_fp32_to_fp8(FLT_MAX, fmt) == maxc && gln_fp32_to_fp8(1e10f, fmt) == maxc);
        CHECK(gln_fp32_to_fp8(NAN, fmt) == 0x7F && gln_fp32_to_fp8(-NAN, fmt) == 0xFF);
        CHECK(gln_fp32_to_fp8(-0.0f, fmt) == 0x80 && gln_fp32_to_fp8(1e-30f, fmt) == 0x00);
    }
    /* 464 is the tie between 448 and 480: to the even code, which is also the saturated one */
    CHECK(gln_fp32_to_fp8(464.0f, GLN_DTYPE_FP8_E4M3) == 0x7E);
    CHECK(gln_fp32_to_fp8(61440.0f, GLN_DTYPE_FP8_E5M2) == 0x7B);
    /* half the smallest subnormal rounds to the even code 0 */
    CHECK(gln_fp32_to_fp8(ldexpf(1.0f, -10), GLN_DTYPE_FP8_E4M3) == 0x00);
    CHECK(gln_fp32_to_fp8(ldexpf(1.5f, -10), GLN_DTYPE_FP8_E4M3) == 0x01);
    CHECK_MSG(bad == 0, "%d FP8 encode mismatches", bad);
}

/* E8M0 round-up: the smallest code c (<= 254) with 2^(c-127) >= amax·fl(1/fp8_max). */
static uint8_t e8m0_up_ref(float amax, gln_dtype_t fmt) {
    if (isnan(amax)) return 255;
    if (isinf(amax)) return 254;
    float v = amax * (1.0f / gln_fp8_max(fmt));
    if (v == 0.0f) return 0;
    for (int c = 0; c <= 254; c++)
        if (ldexp(1.0, c - 127) >= (double)v) return (uint8_t)c;
    return 254;
}

/* OCP floor rule: floor(log2 amax) - emax_elem + 127, clamped. */
static uint8_t e8m0_floor_ref(float amax, gln_dtype_t fmt) {
    if (isnan(amax)) return 255;
    if (isinf(amax)) return 254;
    if (amax == 0.0f) return 0;
    int k = -149;
    while (ldexp(1.0, k + 1) <= (double)fabsf(amax)) k++;
    int c = k - (fmt == GLN_DTYPE_FP8_E4M3 ? 8 : 15) + 127;
    return (uint8_t)(c < 0 ? 0 : c > 254 ? 254 : c);
}

static void test_e8m0(void) {
    static const gln_dtype_t fmts[2] = {GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E5M2};
    gln_rng_t rng = gln_rng_seed(13);
    int bad = 0;
    for (int f = 0; f < 2; f++) {
        gln_dtype_t fmt = fmts[f];
        for (int i = 0; i < 20000; i++) {
            float a = float_of((uint32_t)gln_rng_u64(&rng) & 0x7FFFFFFFu);
            if (i % 3 == 0) a = ldexpf(1.0f, (int)(i % 277) - 149); /* powers of two */
            if (i % 3 == 1) a = nextafterf(ldexpf(gln_fp8_max(fmt), (int)(i % 240) - 130), INFINITY);
            if (gln_e8m0_from_amax(a, fmt, GLN_E8M0_ROUND_UP) != e8m0_up_ref(a, fmt)) bad++;
            if (gln_e8m0_from_amax(a, fmt, GLN_E8M0_ROUND_FLOOR) != e8m0_floor_ref(a, fmt)) bad++;
        }
        CHECK(gln_e8m0_from_amax(0.0f, fmt, GLN_E8M0_ROUND_UP) == 0);
        CHECK(gln_e8m0_from_amax(NAN, fmt, GLN_E8M0_ROUND_UP) == 255);
        CHECK(gln_e8m0_from_amax(INFINITY, fmt, GLN_E8M0_ROUND_UP) == 254);
        CHECK(gln_e8m0_from_amax(0.0f, fmt, GLN_E8M0_ROUND_FLOOR) == 0);
        CHECK(gln_e8m0_from_amax(NAN, fmt, GLN_E8M0_ROUND_FLOOR) == 255);
        CHECK(gln_e8m0_from_amax(INFINITY, fmt, GLN_E8M0_ROUND_FLOOR) == 254);
    }
    /* amax = 448: v = 448 · fl(1/448) rounds to exactly 1 or just above; the reference decides */
    CHECK(gln_e8m0_from_amax(448.0f, GLN_DTYPE_FP8_E4M3, GLN_E8M0_ROUND_UP) ==
          e8m0_up_ref(448.0f, GLN_DTYPE_FP8_E4M3));
    CHECK(gln_e8m0_from_amax(1.0f, GLN_DTYPE_FP8_E4M3, GLN_E8M0_ROUND_FLOOR) == 119);   /* 0 - 8 + 127 */
    CHECK(gln_e8m0_from_amax(448.0f, GLN_DTYPE_FP8_E4M3, GLN_E8M0_ROUND_FLOOR) == 127); /* 8 - 8 + 127 */
    /* the subnormal rule: v <= 2^-127 gives code 0, v just above gives 1 */
    float v_at = float_of(0x00400000u), v_above = float_of(0x00400001u);
    CHECK(e8m0_up_ref(v_at * 57344.0f, GLN_DTYPE_FP8_E5M2) ==
          gln_e8m0_from_amax(v_at * 57344.0f, GLN_DTYPE_FP8_E5M2, GLN_E8M0_ROUND_UP));
    CHECK(gln_e8m0_from_amax(v_above * 57344.0f, GLN_DTYPE_FP8_E5M2, GLN_E8M0_ROUND_UP) ==
          e8m0_up_ref(v_above * 57344.0f, GLN_DTYPE_FP8_E5M2));
    CHECK_MSG(bad == 0, "%d E8M0 mismatches", bad);
    for (int c = 0; c < 255; c++) {
        CHECK_MSG((double)gln_e8m0_to_fp32((uint8_t)c) == ldexp(1.0, c - 127), "decode %d", c);
        CHECK_MSG((double)gln_e8m0_inverse((uint8_t)c) == ldexp(1.0, 127 - c), "inverse %d", c);
    }
    CHECK(bits_of(gln_e8m0_inverse(254)) == 0x00400000u);
    CHECK(isnan(gln_e8m0_to_fp32(255)) && isnan(gln_e8m0_inverse(255)));
}

static void test_scale_from_amax(void) {
    const float m = 448.0f;
    CHECK(gln_scale_from_amax(0.0f, m, 0, 0.0f, FLT_MAX) == 1.0f);
    CHECK(gln_scale_from_amax(INFINITY, m, 0, 0.0f, FLT_MAX) == 1.0f);
    CHECK(gln_scale_from_amax(NAN, m, 0, 0.0f, FLT_MAX) == 1.0f);
    CHECK(gln_scale_from_amax(NAN, m, 0, 1.0f, FLT_MAX) == 1.0f); /* NaN passes the epsilon floor */
    CHECK(gln_scale_from_amax(3.0f, m, 0, 0.0f, FLT_MAX) == (float)(448.0 / 3.0));
    CHECK(gln_scale_from_amax(3.0f, m, 1, 0.0f, FLT_MAX) == 128.0f); /* 149.33 rounded down */
    CHECK(gln_scale_from_amax(1e-6f, m, 0, 1e-3f, FLT_MAX) == (float)(448.0 / (double)1e-3f));
    CHECK(gln_scale_from_amax(0.0f, m, 0, 2.0f, FLT_MAX) == 224.0f);    /* 0 raised to epsilon */
    CHECK(gln_scale_from_amax(1e-45f, m, 0, 0.0f, FLT_MAX) == FLT_MAX); /* overflow → value_for_inf */
    CHECK(gln_scale_from_amax(1e-45f, m, 0, 0.0f, 65504.0f) == 65504.0f);
    CHECK(gln_scale_from_amax(1e-45f, m, 1, 0.0f, FLT_MAX) == ldexpf(1.0f, 127));
    CHECK(gln_scale_from_amax(448.0f, m, 1, 0.0f, FLT_MAX) == 1.0f);
    CHECK(gln_scale_from_amax(1000.0f, m, 1, 0.0f, FLT_MAX) == 0.25f); /* 0.448 → 0.25 */
}

GLN_TEST_MAIN(GLN_CASE(test_dtype_basics), GLN_CASE(test_half_formats_all_patterns),
              GLN_CASE(test_half_formats_rounding), GLN_CASE(test_fp8_decode_all_codes),
              GLN_CASE(test_fp8_encode), GLN_CASE(test_e8m0), GLN_CASE(test_scale_from_amax))

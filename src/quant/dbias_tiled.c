/* CPU reference of the tiled dbias order (quant/dbias_tiled.h). */
#include "quant/dbias_tiled.h"

#include <string.h>

#include "numerics/numerics.h"
#include "quant/quant.h"

/* a + b with the NaN rules of the header made explicit: a NaN operand comes back quieted (the
 * first one when both are NaN; a compiler may swap the operands of +), and a NaN made from two
 * non-NaN operands (Inf - Inf) is 0x7FFFFFFF, the device's, not the host's default NaN. */
static float dbias_add(float a, float b) {
    if (gln_f32_isnan(a) || gln_f32_isnan(b))
        return gln_f32_from_bits(gln_f32_bits(gln_f32_isnan(a) ? a : b) | 0x00400000u);
    const float s = a + b;
    return gln_f32_isnan(s) ? gln_f32_from_bits(0x7FFFFFFFu) : s;
}

/* p_t of the header: tile rows [r0, r0 + 128) of a member with m rows, column j. */
static float dbias_tile(const void *x, gln_dtype_t dt, int64_t cols, int64_t m, int64_t r0, int64_t j) {
    float d[8];
    for (int w = 0; w < 8; w++) {
        float a[8];
        for (int q = 0; q < 8; q++) {
            const int64_t r = r0 + 8 * w + q, r2 = r + 64;
            const float v1 = r < m ? gln_hp_load(x, dt, r * cols + j) : 0.0f;
            const float v2 = r2 < m ? gln_hp_load(x, dt, r2 * cols + j) : 0.0f;
            a[q] = dbias_add(v1, v2);
        }
        const float b0 = dbias_add(a[0], a[1]), b1 = dbias_add(a[2], a[3]);
        const float b2 = dbias_add(a[4], a[5]), b3 = dbias_add(a[6], a[7]);
        d[w] = dbias_add(dbias_add(b0, b1), dbias_add(b2, b3));
    }
    float p = d[0];
    for (int w = 1; w < 8; w++) p = dbias_add(p, d[w]);
    return p;
}

gln_status_t gln_grouped_dbias_tiled_ref(const gln_grouped_tensor_t *dy, gln_tensor_t *dbias, int accumulate) {
    const gln_tensor_t *p = &dy->packed;
    const int64_t cols = p->cols;
    const size_t es = gln_dtype_size(p->dtype);
    int64_t row0 = 0;
    for (int32_t i = 0; i < dy->num; i++) {
        const int64_t m = dy->splits[i];
        gln_tensor_t *db = &dbias[i];
        if (m == 0 && accumulate) continue;
        const void *x = m ? (const char *)p->data + (size_t)row0 * (size_t)cols * es : NULL;
        for (int64_t j = 0; j < cols; j++) {
            float s = 0.0f;
            for (int64_t r0 = 0; r0 < m; r0 += GLN_DBIAS_TILE_ROWS) s = dbias_add(s, dbias_tile(x, p->dtype, cols, m, r0, j));
            if (accumulate) s = dbias_add(s, gln_hp_load(db->data, db->dtype, j));
            gln_hp_store(db->data, db->dtype, j, s);
        }
        row0 += m;
    }
    return GLN_STATUS_SUCCESS;
}

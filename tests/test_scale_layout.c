/* The one scale-layout definition (src/tensor/scale_layout.h), checked against
 * the public description of the layouts rather than against itself:
 *
 *   - placement: for every element (r, c) of every copy, gln_scale_index lies inside the padded
 *     grid, two elements share an index exactly when they share a scale block of the table in
 *     grouplin.h (MXFP8 1x32 / 32x1, BLOCK_1D 1x128 / 128x1, BLOCK_2D 128x128, TENSOR one), and
 *     gln_scale_index_in_grid (the kernels' form) gives the same index;
 *   - sizes: gln_member_scale_elems times the scale element size is the byte size that the
 *     public gln_quant_layout reports, and the grid is what gln_quant_layout reports;
 *   - grouped offsets: gln_grouped_scale_offsets advances by each member's scale elements. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tensor/scale_layout.h"

static const int64_t dims[] = {0, 1, 5, 17, 32, 33, 129, 200};
#define NDIMS (sizeof dims / sizeof dims[0])
static const gln_scaling_mode_t modes[] = {GLN_SCALING_TENSOR, GLN_SCALING_MXFP8_1D, GLN_SCALING_BLOCK_1D,
                                           GLN_SCALING_BLOCK_2D};
#define NMODES (sizeof modes / sizeof modes[0])

/* The block edges (rows x cols) of one copy, from the table in grouplin.h. */
static void block_shape(gln_scaling_mode_t mode, int columnwise, int64_t R, int64_t C, int64_t *br, int64_t *bc) {
    switch (mode) {
    case GLN_SCALING_MXFP8_1D: *br = columnwise ? 32 : 1, *bc = columnwise ? 1 : 32; return;
    case GLN_SCALING_BLOCK_1D: *br = columnwise ? 128 : 1, *bc = columnwise ? 1 : 128; return;
    case GLN_SCALING_BLOCK_2D: *br = 128, *bc = 128; return;
    default: *br = R > 0 ? R : 1, *bc = C > 0 ? C : 1; return; /* TENSOR: one block */
    }
}

/* Every element's index in range, blocks <-> indices one to one. */
static void check_placement(gln_scaling_mode_t mode, int columnwise, int64_t R, int64_t C) {
    int64_t gr, gc, br, bc;
    gln_scale_grid(mode, R, C, columnwise, &gr, &gc);
    block_shape(mode, columnwise, R, C, &br, &bc);
    const int64_t elems = gln_member_scale_elems(mode, R, C, columnwise);
    CHECK(elems == gr * gc);
    const int64_t nbr = (R + br - 1) / br, nbc = (C + bc - 1) / bc;
    int64_t *index_of_block = malloc((size_t)(nbr * nbc + 1) * sizeof(int64_t));
    int64_t *block_of_index = malloc((size_t)(elems + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < nbr * nbc; i++) index_of_block[i] = -1;
    for (int64_t i = 0; i < elems; i++) block_of_index[i] = -1;
    int bad = 0;
    for (int64_t r = 0; r < R && !bad; r++) {
        for (int64_t c = 0; c < C && !bad; c++) {
            const int64_t k = gln_scale_index(mode, R, C, columnwise, r, c);
            const int64_t b = (r / br) * nbc + c / bc;
            if (k < 0 || k >= elems) {
                CHECK_MSG(0, "mode %d col %d [%lld, %lld]: (%lld, %lld) -> %lld outside [0, %lld)", (int)mode,
                          columnwise, (long long)R, (long long)C, (long long)r, (long long)c, (long long)k,
                          (long long)elems);
                bad = 1;
                break;
            }
            if (gln_scale_index_in_grid(mode, columnwise, r, c, gc) != k) {
                CHECK_MSG(0, "mode %d col %d: index_in_grid differs at (%lld, %lld)", (int)mode, columnwise,
                          (long long)r, (long long)c);
                bad = 1;
            }
            if (index_of_block[b] < 0) index_of_block[b] = k;
            if (block_of_index[k] < 0) block_of_index[k] = b;
            if (index_of_block[b] != k || block_of_index[k] != b) {
                CHECK_MSG(0, "mode %d col %d [%lld, %lld]: (%lld, %lld) block %lld index %lld breaks the one "
                          "scale per block rule", (int)mode, columnwise, (long long)R, (long long)C, (long long)r,
                          (long long)c, (long long)b, (long long)k);
                bad = 1;
            }
        }
    }
    free(index_of_block);
    free(block_of_index);
}

static void test_placement(void) {
    for (size_t m = 0; m < NMODES; m++)
        for (size_t i = 0; i < NDIMS; i++)
            for (size_t j = 0; j < NDIMS; j++)
                for (int col = 0; col < 2; col++) check_placement(modes[m], col, dims[i], dims[j]);
    CHECK(gln_scale_index(GLN_SCALING_NONE, 4, 4, 0, 1, 1) == -1);
    CHECK(gln_scale_index_in_grid(GLN_SCALING_NONE, 0, 1, 1, 4) == -1);
    CHECK(gln_member_scale_elems(GLN_SCALING_NONE, 4, 4, 0) == 0);
}

static void test_sizes_match_public_layout(void) {
    for (size_t m = 0; m < NMODES; m++) {
        for (size_t i = 0; i < NDIMS; i++) {
            for (size_t j = 0; j < NDIMS; j++) {
                const int64_t R = dims[i], C = dims[j];
                gln_quant_layout_t l;
                CHECK_OK(gln_quant_layout(modes[m], GLN_DTYPE_FP8_E4M3, R, C, &l));
                const size_t es = gln_scale_elem_size(modes[m]);
                CHECK(es == (modes[m] == GLN_SCALING_MXFP8_1D ? 1u : 4u));
                CHECK(l.scale_bytes == (size_t)gln_member_scale_elems(modes[m], R, C, 0) * es);
                CHECK(l.col_scale_bytes == (size_t)gln_member_scale_elems(modes[m], R, C, 1) * es);
                int64_t gr, gc;
                gln_scale_grid(modes[m], R, C, 0, &gr, &gc);
                CHECK(gr == l.scale_rows && gc == l.scale_cols);
                gln_scale_grid(modes[m], R, C, 1, &gr, &gc);
                CHECK(gr == l.col_scale_rows && gc == l.col_scale_cols);
            }
        }
    }
    /* the transposed copies and block edges of the table */
    CHECK(gln_scaling_transposes(GLN_SCALING_TENSOR) && gln_scaling_transposes(GLN_SCALING_BLOCK_1D) &&
          gln_scaling_transposes(GLN_SCALING_BLOCK_2D) && !gln_scaling_transposes(GLN_SCALING_MXFP8_1D));
    CHECK(gln_scaling_block(GLN_SCALING_MXFP8_1D) == 32 && gln_scaling_block(GLN_SCALING_BLOCK_2D) == 128 &&
          gln_scaling_block(GLN_SCALING_TENSOR) == 0);
    CHECK(gln_round_up(0, 4) == 0 && gln_round_up(5, 4) == 8 && gln_ceil_div(129, 128) == 2);
}

static void test_grouped_offsets(void) {
    const int64_t splits[] = {0, 17, 1, 129, 0, 33};
    const int32_t n = (int32_t)(sizeof splits / sizeof splits[0]);
    for (size_t m = 0; m < NMODES; m++) {
        int64_t ro[7], co[7];
        CHECK_OK(gln_grouped_scale_offsets(modes[m], n, splits, 40, ro, co));
        int64_t r = 0, c = 0;
        for (int32_t i = 0; i < n; i++) {
            CHECK(ro[i] == r && co[i] == c);
            r += gln_member_scale_elems(modes[m], splits[i], 40, 0);
            c += gln_member_scale_elems(modes[m], splits[i], 40, 1);
        }
        CHECK(ro[n] == r && co[n] == c);
    }
}

GLN_TEST_MAIN(GLN_CASE(test_placement), GLN_CASE(test_sizes_match_public_layout), GLN_CASE(test_grouped_offsets))

/* Device side of the group plan: how a grouped kernel finds its member.
 *
 * A grouped kernel launched once for all members covers each member's rows in tiles of
 * `tile_rows` rows (the last tile of a member may be partial; an empty member has none).  The
 * grid is sized on the host from what the host knows, never the device splits: at most
 * gln_group_tiles_bound(total rows, num, tile_rows) tiles; blocks past the last real tile exit.
 * Included by .cu files only, after cuda_backend.h. */
#ifndef GLN_BACKEND_CUDA_GROUP_CUH
#define GLN_BACKEND_CUDA_GROUP_CUH

#ifndef __CUDACC__
#error "cuda_group.cuh is for CUDA sources only"
#endif

/* Upper bound on Σ ceil(m_i / tile_rows) over num members summing to at most `rows`. */
static inline int64_t gln_group_tiles_bound(int64_t rows, int32_t num, int64_t tile_rows) {
    return (rows + tile_rows - 1) / tile_rows + num;
}

/* Where tile `t` (in member order) lies: its member, the member's first packed row and row count,
 * and the tile's index within the member; 0 when t is past the last tile.  Done by a whole warp
 * (every lane must call it; every lane gets the answer): 32 members per step, their tile counts
 * prefix-summed across the lanes, so a block finds its member in ceil(num / 32) steps. */
__device__ __forceinline__ int gln_group_tile_warp(const int64_t *rows, int32_t num, int64_t tile_rows, int64_t t,
                                                   int32_t *member, int64_t *first_row, int64_t *member_rows,
                                                   int64_t *tile_in_member) {
    const unsigned int all = 0xFFFFFFFFu;
    const int lane = (int)(threadIdx.x & 31u);
    int64_t before = 0; /* tiles of the members of the earlier steps */
    for (int32_t i0 = 0; i0 < num; i0 += 32) {
        const int32_t i = i0 + lane;
        const int64_t r0 = i < num ? rows[i] : 0, m = i < num ? rows[i + 1] - r0 : 0;
        const int64_t tiles = (m + tile_rows - 1) / tile_rows;
        int64_t incl = tiles; /* inclusive prefix sum over the lanes */
        for (int off = 1; off < 32; off <<= 1) {
            const int64_t y = __shfl_up_sync(all, incl, off);
            if (lane >= off) incl += y;
        }
        const int64_t start = before + incl - tiles;
        const unsigned int hit = __ballot_sync(all, t >= start && t < start + tiles);
        if (hit) {
            const int src = __ffs((int)hit) - 1;
            *member = i0 + src;
            *first_row = __shfl_sync(all, r0, src);
            *member_rows = __shfl_sync(all, m, src);
            *tile_in_member = t - __shfl_sync(all, start, src);
            return 1;
        }
        before += __shfl_sync(all, incl, 31);
    }
    return 0;
}

#endif

/* Hopper bulk-copy (TMA) and mbarrier primitives for the hand-written streaming kernels (the
 * quantizers): a load pipeline whose bytes in flight cost no registers.
 *
 * A kernel keeps a ring of S shared-memory stages, each with one "full" mbarrier.  One elected
 * thread arms a stage's barrier with the bytes it expects (gln_mbar_expect_tx) and issues the
 * copies that complete on it (gln_tma_load_2d: a box of a 2-D tensor map; gln_bulk_load: a
 * contiguous run of 16-byte multiples); consumers wait on the barrier's phase parity
 * (gln_mbar_wait) and read the stage.  Before a stage is refilled every consumer must be done with
 * it: a block-wide __syncthreads, or a second "empty" mbarrier per stage that the consumers arrive
 * on (gln_mbar_arrive) and the producer waits on.  Shared memory written by ordinary stores and
 * then read by a bulk store (gln_bulk_store) needs gln_fence_async_smem() between the two.
 *
 * Only sm_90 code paths may call the device functions (the library is built for sm_90a).  The host
 * helper encodes tensor maps through the driver entry point the runtime hands out, so the library
 * does not link libcuda directly. */
#ifndef GLN_CUDA_TMA_CUH
#define GLN_CUDA_TMA_CUH

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdint.h>

/* ---- host ------------------------------------------------------------------------------------ */

/* Encodes a row-major 2-D tensor [rows, cols] of `dtype` at `base` (16-byte aligned; row stride
 * `row_bytes`, a multiple of 16) whose boxes are box_rows x box_cols elements (each ≤ 256; with a
 * swizzle, box_cols · element size ≤ the swizzle span).  Out-of-bounds box elements load as zero.
 * Returns 0, or -1 when the driver has no tensor maps or refuses the description. */
static inline int gln_tma_encode_2d(CUtensorMap *map, CUtensorMapDataType dtype, const void *base, uint64_t rows,
                                    uint64_t cols, uint64_t row_bytes, uint32_t box_rows, uint32_t box_cols,
                                    CUtensorMapSwizzle swizzle) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL; /* a racing first call stores the same value */
    if (!encode) {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !fn) {
            (void)cudaGetLastError();
            return -1;
        }
        encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    }
    const cuuint64_t dims[2] = {cols, rows};
    const cuuint64_t strides[1] = {row_bytes};
    const cuuint32_t box[2] = {box_cols, box_rows};
    const cuuint32_t unit[2] = {1, 1};
    return encode(map, dtype, 2, (void *)base, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS
               ? 0
               : -1;
}

/* ---- device ---------------------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t gln_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* Initializes a barrier that completes a phase after `count` arrivals (plus the transaction bytes
 * armed on it).  Call from one thread, then gln_mbar_init_fence() and a __syncthreads. */
__device__ __forceinline__ void gln_mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(gln_smem_addr(bar)), "r"(count) : "memory");
}

/* Makes initialized barriers visible to the async (TMA) proxy. */
__device__ __forceinline__ void gln_mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

/* One arrival that also expects `bytes` of bulk copies to complete on the barrier this phase. */
__device__ __forceinline__ void gln_mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(gln_smem_addr(bar)), "r"(bytes)
                 : "memory");
}

/* One plain arrival (e.g. a consumer releasing a stage on its "empty" barrier). */
__device__ __forceinline__ void gln_mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(gln_smem_addr(bar)) : "memory");
}

/* Waits until the barrier's phase with the given parity (0, 1, 0, ... per completed phase) is
 * complete. */
__device__ __forceinline__ void gln_mbar_wait(uint64_t *bar, uint32_t parity) {
    const uint32_t a = gln_smem_addr(bar);
    uint32_t done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
    } while (!done);
}

/* Loads the box at (row, col) of a tensor map into shared memory; completes on `bar`.  `map` must
 * be a __grid_constant__ kernel parameter (or in global / constant memory). */
__device__ __forceinline__ void gln_tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int32_t row,
                                                int32_t col) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
                     gln_smem_addr(dst)),
                 "l"((uint64_t)map), "r"(gln_smem_addr(bar)), "r"(col), "r"(row)
                 : "memory");
}

/* Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared memory;
 * completes on `bar`. */
__device__ __forceinline__ void gln_bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     gln_smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(gln_smem_addr(bar))
                 : "memory");
}

/* Asks L2 to fetch `bytes` (a multiple of 16, 16-byte aligned) ahead of a later load. */
__device__ __forceinline__ void gln_bulk_prefetch_l2(const void *src, uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

/* Orders this thread's ordinary shared-memory writes before later async-proxy (bulk) reads of them. */
__device__ __forceinline__ void gln_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* Copies `bytes` (a multiple of 16, both 16-byte aligned) from shared to global memory in this
 * thread's current bulk group. */
__device__ __forceinline__ void gln_bulk_store(void *dst, const void *src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(gln_smem_addr(src)),
                 "r"(bytes)
                 : "memory");
}

/* Closes this thread's current bulk group. */
__device__ __forceinline__ void gln_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

/* Waits until at most N of this thread's bulk groups still read their shared-memory source. */
template <int N> __device__ __forceinline__ void gln_bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/* Waits until at most N of this thread's bulk groups are incomplete (their writes visible). */
template <int N> __device__ __forceinline__ void gln_bulk_wait() {
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

#endif

/* Kernel lab: the block-scaled FP8 main loop with each 128-wide K block's scaled promotion
 * overlapped with the next block's MMAs (the idea of src/backend/cuda/cutlass/
 * grouped_fp8_overlap.cuh, here with the block scales).  Measured on the H200 (bench/RESULTS.md,
 * 2026-12-04, runs at 8d90690): bitwise equal to CUTLASS's loop on the full shapes' random data,
 * and 4–16 % slower than it on every shape and stage (DeepGEMM's fprop 917 / 941 TFLOP/s on 1×1 /
 * 2×1 clusters against 1000–1156; wgrad 715 against 752), so it stays here.
 *
 * CUTLASS 4.2's Hopper blockwise main loop (sm90_mma_array_tma_gmma_ss_warpspecialized_fp8_
 * blockwise_scaling.hpp) accumulates one K block (= one k-tile of 128) in a temporary tensor-core
 * accumulator, waits until every MMA of its warpgroup has completed, then multiplies the temporary
 * by the block's two decode scales and adds it into the FP32 accumulator, so the tensor cores sit
 * idle while the consumer warps scale, once a k-tile (ncu: 71 % tensor-pipe activity on the fprop
 * against 88 % for the unscaled FP8 kernel, bench/RESULTS.md).  OverlapBlockScaled keeps two
 * temporaries: k-tile k's MMAs go into one while the consumer waits only for k-tile k-1's batch,
 * in the other, and scales and adds it.
 *
 * The arithmetic is CUTLASS's, expression for expression, so ptxas contracts it into the same
 * instructions: per-row × per-tile scales (fprop / dgrad, one weight scale along N) are multiplied
 * first, then `accum += part * scale` (one FFMA); per-row × per-column scales (wgrad) are applied
 * as `accum += part * scale_a * scale_b` (FMUL, FFMA).  The blocks are added in ascending K from
 * an accumulator cleared to zero.  k-tile k-1's scales are read from its shared-memory stage,
 * which stays held until its promotion is done.
 *
 * OverlapBlockScaled<Base> derives from the builder's collective and replaces mma() only, on the
 * library's overlapped loop (overlap_issue, overlap_k_loop in grouped_fp8_overlap.cuh): loads
 * (TMA for the operands, cp.async for the scales), pipeline, shared memory and mma_tail() are
 * Base's.  Cooperative schedule only: the register budget (accumulator + two temporaries, 3 × 64
 * FP32 a thread on a 128 × 128 tile, plus the wgrad's 32 column scales) rules out wider tiles. */
#ifndef GLN_BENCH_LAB_LAB_BLOCKWISE_OVERLAP_CUH
#define GLN_BENCH_LAB_LAB_BLOCKWISE_OVERLAP_CUH

#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"
#include "backend/cuda/cutlass/grouped_fp8_overlap.cuh"

namespace gln_cutlass_bw {

template <class Base> struct OverlapBlockScaled : Base {
    using typename Base::ElementBlockScale;
    using typename Base::MainloopPipeline;
    using typename Base::Params;
    using typename Base::PipelineState;
    using typename Base::SmemLayoutA;
    using typename Base::SmemLayoutB;
    using typename Base::SmemLayoutSFA;
    using typename Base::SmemLayoutSFB;
    using typename Base::TensorStorage;
    using typename Base::TileShape;
    using typename Base::TiledMma;
    static constexpr int kMs = Base::ScaleMsPerTile; /* distinct A scales a tile along M */
    static constexpr int kNs = Base::ScaleNsPerTile; /* distinct B scales a tile along N */
    static_assert(Base::ScaleGranularityK == cute::size<2>(TileShape{}),
                  "one K block of scales per k-tile: the promotion follows every k-tile");

    template <class FrgTensorC>
    CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState read, FrgTensorC &accum, int k_tiles,
                            int thread_idx, TensorStorage &smem, Params const &) {
        using namespace cute;
        static_assert(is_rmem<FrgTensorC>::value, "the accumulator lives in registers");
        Tensor sA = make_tensor(make_smem_ptr(smem.smem_A.data()), SmemLayoutA{});
        Tensor sB = make_tensor(make_smem_ptr(smem.smem_B.data()), SmemLayoutB{});
        /* the scales as (BLK_M, BLK_N, (BLK_K, PIPE)) views broadcast along the other operand's
         * mode, so that the MMA's C partition gives each thread the scales of its elements */
        Tensor sSFA = make_tensor(
            make_smem_ptr(smem.smem_SFA.data()),
            make_layout(make_shape(shape<0>(SmemLayoutSFA{}), get<1>(TileShape{}),
                                   make_shape(shape<1>(SmemLayoutSFA{}), shape<2>(SmemLayoutSFA{}))),
                        make_stride(stride<0>(SmemLayoutSFA{}), _0{},
                                    make_stride(stride<1>(SmemLayoutSFA{}), stride<2>(SmemLayoutSFA{})))));
        Tensor sSFB = make_tensor(
            make_smem_ptr(smem.smem_SFB.data()),
            make_layout(make_shape(get<0>(TileShape{}), shape<0>(SmemLayoutSFB{}),
                                   make_shape(shape<1>(SmemLayoutSFB{}), shape<2>(SmemLayoutSFB{}))),
                        make_stride(_0{}, stride<0>(SmemLayoutSFB{}),
                                    make_stride(stride<1>(SmemLayoutSFB{}), stride<2>(SmemLayoutSFB{})))));
        constexpr int wg_threads = cutlass::NumThreadsPerWarpGroup;
        constexpr int warpgroups = size(TiledMma{}) / wg_threads;
        const Layout wg_layout = make_layout(Int<warpgroups>{}, Int<wg_threads>{});
        const int wg = __shfl_sync(0xffffffff, thread_idx / wg_threads, 0);
        TiledMma tiled_mma;
        auto thr = tiled_mma.get_slice(wg_layout(wg));
        Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA)); /* (MMA, MMA_M, MMA_K, PIPE) descriptors */
        Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
        Tensor tCsSFA = tiled_mma.get_slice(thread_idx).partition_C(sSFA); /* (MMA, MMA_M, MMA_N, (K, PIPE)) */
        Tensor tCsSFB = tiled_mma.get_slice(thread_idx).partition_C(sSFB);
        Tensor tCrSFA = make_tensor_like<ElementBlockScale>(tCsSFA(_, _, _, _0{})); /* stride-0 modes kept */
        Tensor tCrSFB = make_tensor_like<ElementBlockScale>(tCsSFB(_, _, _, _0{}));
        Tensor part0 = make_fragment_like(accum); /* the two temporaries, alternating by k-tile */
        Tensor part1 = make_fragment_like(accum);
        PipelineState release = read;
        clear(accum);
        clear(part0);
        clear(part1);
        if (k_tiles <= 0) return;

        auto issue = [&](auto &part) {
            gln_cutlass::overlap_issue(pipeline, read, tiled_mma, tCrA, tCrB, part);
        };
        /* k-tile `release` (in part): its scales from its stage, read while its MMAs finish; the
         * batch is complete once at most `in_flight` remain; then accum += part × scales */
        auto promote = [&](auto &part, auto in_flight) {
            const int stage = release.index();
            copy(tCsSFA(_, _, _, make_coord(_0{}, stage)), tCrSFA);
            if constexpr (kMs == 1 || kNs == 1) copy(tCsSFB(_, _, _, make_coord(_0{}, stage)), tCrSFB);
            if constexpr (kMs == 1 && kNs == 1) tCrSFA(_0{}) = tCrSFA(_0{}) * tCrSFB(_0{});
            if constexpr (kMs > 1 && kNs == 1) {
                const ElementBlockScale sb = tCrSFB(_0{});
                CUTLASS_PRAGMA_UNROLL
                for (int i = 0; i < size(filter_zeros(tCrSFA)); i++) filter_zeros(tCrSFA)(i) = filter_zeros(tCrSFA)(i) * sb;
            }
            if constexpr (kMs == 1 && kNs > 1) {
                const ElementBlockScale sa = tCrSFA(_0{});
                CUTLASS_PRAGMA_UNROLL
                for (int i = 0; i < size(filter_zeros(tCrSFB)); i++) filter_zeros(tCrSFB)(i) = filter_zeros(tCrSFB)(i) * sa;
            }
            warpgroup_wait<decltype(in_flight)::value>();
            warpgroup_fence_operand(part);
            warpgroup_fence_operand(accum);
            if constexpr (kMs == 1 && kNs == 1) {
                const ElementBlockScale s = tCrSFA(_0{});
                CUTLASS_PRAGMA_UNROLL
                for (int i = 0; i < size(accum); ++i) accum(i) += part(i) * s;
            } else if constexpr (kMs > 1 && kNs == 1) {
                CUTLASS_PRAGMA_UNROLL
                for (int i = 0; i < size(accum); ++i) accum(i) += part(i) * tCrSFA(i);
            } else if constexpr (kMs == 1 && kNs > 1) {
                CUTLASS_PRAGMA_UNROLL
                for (int i = 0; i < size(accum); ++i) accum(i) += part(i) * tCrSFB(i);
            } else { /* the column scales straight from shared memory: in registers they would
                      * spill (3 × 64 accumulators + 32 distinct column scales a thread) */
                Tensor sfb = tCsSFB(_, _, _, make_coord(_0{}, stage));
                CUTLASS_PRAGMA_UNROLL
                for (int i = 0; i < size(accum); ++i) accum(i) += part(i) * tCrSFA(i) * sfb(i);
            }
            warpgroup_fence_operand(accum);
        };
        auto release_one = [&]() {
            pipeline.consumer_release(release);
            ++release;
        };
        gln_cutlass::overlap_k_loop(k_tiles, part0, part1, issue, promote, release_one);
    }
};

/* A Blockwise instantiation with its kernel re-derived around OverlapBlockScaled. */
template <class G> using WithOverlapBlockScaled = gln_cutlass::WithMainloop<G, OverlapBlockScaled>;

} // namespace gln_cutlass_bw

/* GLN_CUTLASS_BLOCKWISE with the overlapped promotion: gln_cutlass_run_<name>(). */
#define GLN_CUTLASS_BLOCKWISE_OVERLAP(name, ...)                                                               \
    using GlnBlockwiseOverlap_##name = gln_cutlass_bw::WithOverlapBlockScaled<gln_cutlass_bw::Blockwise<__VA_ARGS__>>; \
    extern "C" gln_status_t gln_cutlass_run_##name(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw,      \
                                                   const char *call) {                                         \
        return gln_cutlass_bw::run<GlnBlockwiseOverlap_##name>(ctx, bw, call);                                 \
    }

#endif

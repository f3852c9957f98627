/* The promoted per-tensor FP8 main loop with each K tile's promotion to FP32 overlapped with the
 * next tile's MMAs: the library's FP8 wgrad of large experts (grouped_e4m3_wgrad.cu,
 * grouped_e5m2_e4m3_wgrad.cu).
 *
 * CUTLASS 4.2's promoted FP8 main loop accumulates each 128-wide K tile in a temporary
 * tensor-core accumulator, then waits for every MMA its warpgroup has in flight before adding the
 * temporary into the FP32 accumulator, so the MMA pipe is empty while the adds run, once a tile.
 * OverlapPromotion keeps two temporaries: tile k's MMAs go into one while tile k-1's, in the
 * other, complete; then it waits for tile k-1 only and adds it.  The sums and their order are
 * CUTLASS's with its default interval (each tile from zero in the tensor cores, the tiles added
 * into FP32 in ascending K), so the output is the same to the bit — and the same as cuBLASLt's
 * with TransformerEngine's split accumulator, which the kernel lab (grouped_tiles --agree 1)
 * found bitwise equal on the full MoE shapes.  The price is a third accumulator's registers (3 ×
 * 64 FP32 registers a thread on a cooperative 128 × 128 tile), which rules out wider tiles.
 *
 * OverlapPromotion<Base> derives from the builder's collective (Base) and replaces mma() only:
 * loads, pipeline, shared memory, tensor maps and mma_tail() are Base's; the kernel calls mma()
 * on its CollectiveMainloop type, which is this one.  ptxas (CUDA 13, sm_90a) compiles it with
 * no spills and without injected warpgroup waits: every MMA is issued inside the loop and each
 * temporary keeps one role (even / odd tiles), so no register copy touches a batch in flight. */
#ifndef GLN_CUTLASS_GROUPED_FP8_OVERLAP_CUH
#define GLN_CUTLASS_GROUPED_FP8_OVERLAP_CUH

#include "backend/cuda/cutlass/grouped_sm90.cuh"

namespace gln_cutlass {

/* Wait for k-tile `read`'s shared-memory stage, then issue its MMAs into part from a zero
 * accumulator as one batch; read moves on. */
template <class Pipeline, class State, class Mma, class FragA, class FragB, class Part>
CUTLASS_DEVICE void overlap_issue(Pipeline &pipeline, State &read, Mma &tiled_mma, FragA const &tCrA,
                                  FragB const &tCrB, Part &part) {
    using namespace cute;
    pipeline.consumer_wait(read, pipeline.consumer_try_wait(read));
    const int stage = read.index();
    warpgroup_fence_operand(part);
    warpgroup_arrive();
    tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
    CUTLASS_PRAGMA_UNROLL
    for (int kb = 0; kb < size<2>(tCrA); ++kb) {
        cute::gemm(tiled_mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage), part);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    warpgroup_fence_operand(part);
    ++read;
}

/* The overlapped loop over k_tiles k-tiles: issue(part) issues the next k-tile into part,
 * promote(part, Int<n>) adds the older one into the accumulator once at most n batches remain in
 * flight, release() hands its stage back (the last one's is mma_tail()'s).  part0 takes the even
 * k-tiles, part1 the odd ones: each register keeps one role in every iteration, and every MMA is
 * issued inside the loop (register copies between a batch in flight and the loop's registers
 * would make ptxas drain the pipe there). */
template <class Part, class Issue, class Promote, class Release>
CUTLASS_DEVICE void overlap_k_loop(int k_tiles, Part &part0, Part &part1, Issue &&issue, Promote &&promote,
                                   Release &&release) {
    using cute::Int;
    for (int k = 0; k < k_tiles; ++k) {
        if (k & 1) {
            issue(part1);             /* k-tile k */
            promote(part0, Int<1>{}); /* k-tile k - 1 */
        } else {
            issue(part0);
            if (k > 0) promote(part1, Int<1>{});
        }
        if (k > 0) release();
    }
    if ((k_tiles - 1) & 1) promote(part1, Int<0>{});
    else promote(part0, Int<0>{});
}

template <class Base> struct OverlapPromotion : Base {
    using typename Base::MainloopPipeline;
    using typename Base::Params;
    using typename Base::PipelineState;
    using typename Base::SmemLayoutA;
    using typename Base::SmemLayoutB;
    using typename Base::TensorStorage;
    using typename Base::TiledMma;

    template <class FrgTensorC>
    CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState read, FrgTensorC &accum, int k_tiles,
                            int thread_idx, TensorStorage &smem, Params const &) {
        using namespace cute;
        static_assert(is_rmem<FrgTensorC>::value, "the accumulator lives in registers");
        Tensor sA = make_tensor(make_smem_ptr(smem.smem_A.data()), SmemLayoutA{});
        Tensor sB = make_tensor(make_smem_ptr(smem.smem_B.data()), SmemLayoutB{});
        constexpr int wg_threads = cutlass::NumThreadsPerWarpGroup;
        constexpr int warpgroups = size(TiledMma{}) / wg_threads;
        const Layout wg_layout = make_layout(Int<warpgroups>{}, Int<wg_threads>{});
        const int wg = __shfl_sync(0xffffffff, thread_idx / wg_threads, 0);
        TiledMma tiled_mma;
        auto thr = tiled_mma.get_slice(wg_layout(wg));
        Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA)); /* (MMA, MMA_M, MMA_K, PIPE) descriptors */
        Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
        Tensor part0 = make_fragment_like(accum); /* the two temporaries, alternating by tile */
        Tensor part1 = make_fragment_like(accum);
        PipelineState release = read;
        clear(accum);
        clear(part0); /* defined before the first MMA reads its (zero-scaled) accumulator */
        clear(part1);
        if (k_tiles <= 0) return;

        auto issue = [&](auto &part) { overlap_issue(pipeline, read, tiled_mma, tCrA, tCrB, part); };
        /* the older batch (part) is complete once at most `in_flight` batches remain */
        auto promote = [&](auto &part, auto in_flight) {
            warpgroup_wait<decltype(in_flight)::value>();
            warpgroup_fence_operand(part);
            warpgroup_fence_operand(accum);
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < size(accum); ++i) accum(i) += part(i);
            warpgroup_fence_operand(accum);
        };
        auto release_one = [&]() {
            pipeline.consumer_release(release);
            ++release;
        };
        overlap_k_loop(k_tiles, part0, part1, issue, promote, release_one);
    }
};

/* An instantiation G (Grouped, or grouped_blockwise_sm90.cuh's Blockwise) with its kernel
 * re-derived around Loop<G::Mainloop>, a main loop derived from the builder's. */
template <class G, template <class> class Loop> struct WithMainloop : G {
    using Mainloop = Loop<typename G::Mainloop>;
    using Kernel = cutlass::gemm::kernel::GemmUniversal<typename G::ProblemShape, Mainloop, typename G::Epilogue>;
    using StrideA = typename Kernel::InternalStrideA;
    using StrideB = typename Kernel::InternalStrideB;
    using StrideD = typename Kernel::InternalStrideD;
};

/* G around OverlapPromotion; run<> rejects a promotion interval other than the tile's K for it
 * (kFixedPromotion). */
template <class G> struct WithOverlapPromotion : WithMainloop<G, OverlapPromotion> {
    static constexpr bool kFixedPromotion = true;
};

} // namespace gln_cutlass

/* GLN_CUTLASS_GROUPED with the overlapped promotion: gln_cutlass_run_<name>(). */
#define GLN_CUTLASS_GROUPED_OVERLAP(name, ...)                                                                 \
    using GlnGroupedOverlap_##name = gln_cutlass::WithOverlapPromotion<gln_cutlass::Grouped<__VA_ARGS__>>;     \
    extern "C" gln_status_t gln_cutlass_run_##name(gln_context_t *ctx, const gln_cutlass_grouped_t *g,         \
                                                   const char *call) {                                         \
        return gln_cutlass::run<GlnGroupedOverlap_##name>(ctx, g, call);                                       \
    }

#endif

/* Kernel-lab main loop for the promoted per-tensor FP8 GEMMs: the promotion to FP32 overlapped
 * with the next K tile's MMAs.
 *
 * CUTLASS 4.2's promoted FP8 main loop (the library's dgrad and wgrad kernels) accumulates each
 * 128-wide K tile in a temporary tensor-core accumulator, then waits for every MMA its warpgroup
 * has in flight before adding that temporary into the FP32 accumulator — so each tile ends with
 * the MMA pipe drained while the adds run.  OverlapPromotion keeps two temporaries: tile k's MMAs
 * are issued into one while tile k-1's (the other) are still completing; then it waits for tile
 * k-1 only and adds it.  The sums and their order are the same as CUTLASS's with its default
 * interval (each tile from zero in the tensor cores, tiles added into FP32 in ascending order),
 * so the output is the same to the bit; the price is a third accumulator's registers (64 × 128 a
 * warpgroup: 3 × 64 FP32 registers a thread), which rules out tiles wider than 128 × 128.
 *
 * OverlapPromotion<Base> derives from the builder's collective (Base) and replaces mma() only:
 * loads, pipeline, shared memory, tensor maps and mma_tail() are Base's.  The kernel calls mma()
 * on its CollectiveMainloop type, which is this one.  WithOverlapPromotion<G> re-derives a
 * gln_cutlass::Grouped instantiation's kernel around it for gln_cutlass::run. */
#ifndef GLN_LAB_FP8_OVERLAP_CUH
#define GLN_LAB_FP8_OVERLAP_CUH

#include "backend/cuda/cutlass/grouped_sm90.cuh"

namespace gln_lab {

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

        /* tile `read` into part: wait for its stage, issue its MMAs from a zero accumulator */
        auto issue = [&](auto &part) {
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
        };
        /* the older batch (part) is complete once at most `in_flight` batches remain */
        auto promote = [&](auto &part, auto in_flight) {
            warpgroup_wait<decltype(in_flight)::value>();
            warpgroup_fence_operand(part);
            warpgroup_fence_operand(accum);
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < size(accum); ++i) accum(i) += part(i);
            warpgroup_fence_operand(accum);
        };
        /* its shared-memory stage back to the loads; the last tile's is mma_tail()'s */
        auto release_one = [&]() {
            pipeline.consumer_release(release);
            ++release;
        };

        /* part0 takes the even tiles, part1 the odd ones: each register keeps one role in every
         * iteration, and every MMA is issued inside the loop (register copies between a batch in
         * flight and the loop's registers would make ptxas drain the pipe there) */
        for (int k = 0; k < k_tiles; ++k) {
            if (k & 1) {
                issue(part1);             /* tile k */
                promote(part0, Int<1>{}); /* tile k - 1 */
            } else {
                issue(part0);
                if (k > 0) promote(part1, Int<1>{});
            }
            if (k > 0) release_one();
        }
        if ((k_tiles - 1) & 1) promote(part1, Int<0>{});
        else promote(part0, Int<0>{});
    }
};

template <class G> struct WithOverlapPromotion : G {
    using Mainloop = OverlapPromotion<typename G::Mainloop>;
    using Kernel = cutlass::gemm::kernel::GemmUniversal<typename G::ProblemShape, Mainloop, typename G::Epilogue>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
    using StrideA = typename Kernel::InternalStrideA;
    using StrideB = typename Kernel::InternalStrideB;
    using StrideD = typename Kernel::InternalStrideD;
};

} // namespace gln_lab

/* A lab entry point gln_cutlass_run_<name>() for gln_cutlass::Grouped<...> with the overlapped
 * promotion. */
#define GLN_LAB_FP8_OVERLAP(name, ...)                                                                         \
    using GlnLabOverlap_##name = gln_lab::WithOverlapPromotion<gln_cutlass::Grouped<__VA_ARGS__>>;             \
    extern "C" gln_status_t gln_cutlass_run_##name(gln_context_t *ctx, const gln_cutlass_grouped_t *g,         \
                                                   const char *call) {                                         \
        return gln_cutlass::run<GlnLabOverlap_##name>(ctx, g, call);                                           \
    }

#endif

/* Kernel lab: grouped bf16 wgrad into the FP32 main_grad (NT, D = alpha_i·A·B + beta·C with C = D)
 * with the TMA epilogue spelled out instead of chosen by CUTLASS's epilogue builder.  Lab only
 * (bench/lab/lab_epi_*.cu, built with -DGLN_BUILD_LAB=ON); the library's GLN_CUTLASS_GROUPED in
 * src/backend/cuda/cutlass/grouped_sm90.cuh is left as it is and this header reuses its host
 * driver gln_cutlass::run<G> (setup kernel, empty-expert zeroing, launch) unchanged.
 *
 * Why: on many small experts (Qwen3-like, K = 128 rows per expert) the wgrad is bound by reading
 * and writing main_grad in the epilogue.  For a cooperative 128×256 tile with FP32 C = D, the
 * builder (cutlass/epilogue/collective/builders/sm90_builder.inl, sm90_get_tma_dispatch_policy)
 * picks a 128×32 epilogue subtile (16 KB of FP32), 4 C-load stages, 2 D stages and ReuseSmemC: D
 * is staged in the very shared-memory slot its C was loaded into, and a slot returns to the C
 * loader only after the TMA store out of it has completed.  With StagesD = 2 the store pipeline
 * lets one committed store stay in flight (PipelineTmaStore<StagesC, StagesD - 1>), so each
 * epilogue warpgroup waits for its previous 16 KB store before it starts the next subtile.  The
 * knobs here change that: the subtile (bigger TMA boxes), StagesC / StagesD (how many C loads /
 * D stores may be in flight), ReuseSmemC (separate C and D buffers: C slots are released as soon
 * as they are read into registers, independent of the stores) and DelayTmaStore (issue a
 * subtile's store after the next subtile's arithmetic).
 *
 * The collective is assembled with CUTLASS's own Sm90TmaBuilderImpl (the same shared-memory
 * layouts, copy atoms and fusion callbacks the builder would use), given an explicit
 * Sm90PtrArrayTmaWarpSpecialized dispatch policy; the fusion is the library's wgrad fusion,
 * LinearCombination<float, float> with per-expert alpha pointers and a scalar beta.  The
 * mainloop gets whatever shared memory is left (StageCountAutoCarveout), as in the library.
 *
 * Pingpong (the last template parameter, off by default): the ptr-array pingpong kernel and
 * epilogue instead of the cooperative ones.  Each of the two consumer warpgroups then owns a whole
 * CTA tile (Tile is one warpgroup's tile) and they take alternate tiles; CUTLASS's order barrier
 * runs their main loops one after the other and their epilogues one after the other, so one
 * warpgroup's epilogue (main_grad traffic) runs while the other's main loop (tensor work) does.
 * The epilogue's shared memory (C and D stages) is one set that the two warpgroups' epilogues use
 * in turn; its subtile is 64 rows (the builder's rule for this schedule) spread over the 128
 * threads of one warpgroup. */
#ifndef GLN_BENCH_LAB_LAB_EPI_CUH
#define GLN_BENCH_LAB_LAB_EPI_CUH

#include "backend/cuda/cutlass/grouped_sm90.cuh"

namespace gln_lab {

/* The grouped NT wgrad into FP32 — by default bf16 (A column-major x, B row-major dy: the
 * library's GLN_CUTLASS_BF16_NT_F32 operands); EA / LA / EB / LB give other operands, e.g. the FP8
 * wgrad's K-major E4M3 copies (GLN_CUTLASS_E4M3_WGRAD: A row-major, B column-major, for which the
 * builder picks the main loop that promotes to FP32) — cooperative (or, with Pingpong, pingpong) ptr-array kernel,
 * no cluster, with an explicit epilogue: subtile EpiTile (a cute::Shape<M, N>; M must be 128 for
 * the cooperative schedule, 64 for pingpong), StagesC C-load stages, StagesD D-store stages,
 * ReuseSmemC, DelayTmaStore.  It exposes the members gln_cutlass::run<G> reads (the same names as
 * gln_cutlass::Grouped). */
template <class Tile, class EpiTile, int StagesC, int StagesD, bool ReuseSmemC, bool DelayTmaStore,
          bool Pingpong = false, class EA = cutlass::bfloat16_t, class LA = cutlass::layout::ColumnMajor,
          class EB = cutlass::bfloat16_t, class LB = cutlass::layout::RowMajor>
struct WgradEpi {
    static constexpr bool kBias = false;
    using ElementBias = cutlass::bfloat16_t; /* unused (no bias) */
    using ElementA = EA;
    using ElementB = EB;
    using ElementD = float;
    using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
    using TileShape = Tile;
    using Cluster = cute::Shape<cute::_1, cute::_1, cute::_1>;
    static constexpr int kAlignA = 16 / (int)sizeof(ElementA);
    static constexpr int kAlignB = 16 / (int)sizeof(ElementB);
    static constexpr int kAlignD = 16 / (int)sizeof(ElementD);

    using EpiSchedule = cute::conditional_t<Pingpong, cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong,
                                            cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
    using KernelSchedule = cute::conditional_t<Pingpong, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                                               cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>;

    /* The builder's own rules for what is not a knob here: the fragment is the subtile spread over
     * the threads that run one epilogue (the 256 of the two consumer warpgroups for the cooperative
     * schedule, the 128 of one warpgroup for pingpong); the explicit-subtile rules of
     * sm90_compute_tile_shape_or_override (M = 128 for the cooperative schedule, 64 for pingpong,
     * N a multiple of 16), and the subtile must divide the CTA tile. */
    static constexpr int kEpiThreads = Pingpong ? 128 : 256;
    static constexpr int kEpiM = cute::size<0>(EpiTile{});
    static constexpr int kEpiN = cute::size<1>(EpiTile{});
    static_assert(kEpiM == (Pingpong ? 64 : 128) && kEpiN % 16 == 0,
                  "epilogue subtile: 128 (cooperative) or 64 (pingpong) x (multiple of 16)");
    static_assert(cute::size<0>(Tile{}) % kEpiM == 0 && cute::size<1>(Tile{}) % kEpiN == 0,
                  "the epilogue subtile must divide the CTA tile");
    static constexpr int kFragment = kEpiM * kEpiN / kEpiThreads;
    static_assert(!(DelayTmaStore && ReuseSmemC && StagesC <= StagesD),
                  "a delayed store with reused C slots needs more C stages than D stages (else it deadlocks)");
    static_assert(!ReuseSmemC || StagesD <= StagesC, "reusing C slots for D needs StagesD <= StagesC");

    using EpiPolicy = cutlass::epilogue::Sm90PtrArrayTmaWarpSpecialized<StagesC, StagesD, kFragment, ReuseSmemC,
                                                                        DelayTmaStore,
                                                                        EpiSchedule::NumEpilogueWarpGroups>;

    using Epilogue = typename cutlass::epilogue::collective::detail::Sm90TmaBuilderImpl<
        Tile, EpiTile, float, float, float, cutlass::layout::RowMajor *, kAlignD, float, cutlass::layout::RowMajor *,
        kAlignD, cutlass::epilogue::fusion::LinearCombination<float, float>, EpiPolicy>::CollectiveOp;

    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LA *, kAlignA, ElementB, LB *, kAlignB,
        float, Tile, Cluster,
        cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
            sizeof(typename Epilogue::SharedStorage))>,
        KernelSchedule>::CollectiveOp;

    using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
    using StrideA = typename Kernel::InternalStrideA;
    using StrideB = typename Kernel::InternalStrideB;
    using StrideD = typename Kernel::InternalStrideD;
    using Shape = typename ProblemShape::UnderlyingProblemShape;

    /* What the candidate's comment states, checked where it is compiled. */
    static constexpr int kMainloopStages = Mainloop::DispatchPolicy::Stages;
    static constexpr size_t kEpilogueSmem = sizeof(typename Epilogue::SharedStorage);
    static_assert(Kernel::SharedStorageSize <= cutlass::gemm::collective::detail::sm90_smem_capacity_bytes,
                  "the kernel's shared memory exceeds the H100 / H200 opt-in limit");
    static_assert(kMainloopStages >= 2, "fewer than two mainloop stages");
};

} // namespace gln_lab

/* One lab candidate and its C entry point gln_cutlass_run_<name>() (declared in grouped_tiles.c):
 * GLN_LAB_WGRAD_EPI(name, Tile, EpiTile, StagesC, StagesD, ReuseSmemC, DelayTmaStore, mainloop
 * stages, epilogue shared-memory bytes) — the last two are the values the candidate's comment
 * quotes, asserted at compile time so that the comment cannot go stale. */
#define GLN_LAB_WGRAD_EPI(name, Tile, EpiTile, StagesC, StagesD, ReuseSmemC, DelayTmaStore, MainStages, EpiSmem)   \
    GLN_LAB_WGRAD_EPI_SCHED(name, false, Tile, EpiTile, StagesC, StagesD, ReuseSmemC, DelayTmaStore, MainStages,   \
                            EpiSmem)
/* The same with the schedule named: Pingpong true (pingpong) or false (cooperative). */
#define GLN_LAB_WGRAD_EPI_SCHED(name, Pingpong, Tile, EpiTile, StagesC, StagesD, ReuseSmemC, DelayTmaStore,        \
                                MainStages, EpiSmem)                                                               \
    GLN_LAB_WGRAD_EPI_DEFINE(name, MainStages, EpiSmem,                                                            \
                             gln_lab::WgradEpi<Tile, EpiTile, StagesC, StagesD, ReuseSmemC, DelayTmaStore, Pingpong>)

/* The same for the E4M3 wgrad (GLN_CUTLASS_E4M3_WGRAD operands), cooperative schedule. */
#define GLN_LAB_WGRAD_EPI_E4M3(name, Tile, EpiTile, StagesC, StagesD, ReuseSmemC, DelayTmaStore, MainStages,        \
                               EpiSmem)                                                                            \
    GLN_LAB_WGRAD_EPI_DEFINE(name, MainStages, EpiSmem,                                                            \
                             gln_lab::WgradEpi<Tile, EpiTile, StagesC, StagesD, ReuseSmemC, DelayTmaStore, false,  \
                                               cutlass::float_e4m3_t, cutlass::layout::RowMajor,                   \
                                               cutlass::float_e4m3_t, cutlass::layout::ColumnMajor>)

/* What the macros above share: the candidate type (the trailing arguments, which hold commas), its
 * two asserted figures, and the C entry point. */
#define GLN_LAB_WGRAD_EPI_DEFINE(name, MainStages, EpiSmem, ...)                                                   \
    using GlnLab_##name = __VA_ARGS__;                                                                             \
    static_assert(GlnLab_##name::kMainloopStages == (MainStages), #name ": mainloop stage count");                 \
    static_assert(GlnLab_##name::kEpilogueSmem == (EpiSmem), #name ": epilogue shared memory");                    \
    extern "C" gln_status_t gln_cutlass_run_##name(gln_context_t *ctx, const gln_cutlass_grouped_t *g,             \
                                                   const char *call) {                                             \
        return gln_cutlass::run<GlnLab_##name>(ctx, g, call);                                                      \
    }

#endif

/* Block-scaled FP8 grouped GEMMs on CUTLASS's Hopper ptr-array blockwise mainloop
 * (KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise): the tensor cores accumulate one
 * 128-wide K block, the consumer warps multiply that FP32 partial sum by the block's two decode
 * scales and add it to the FP32 accumulator.  Driven from the device like grouped_sm90.cuh: a
 * setup kernel turns the group plan into per-expert shapes, operand / scale / output pointers and
 * strides, the scale repacks run on the stream (cuda_grouped_blockwise_scales.cu), and nothing
 * waits for the host.  The scale layouts are explained in cuda_grouped_blockwise.h. */
#ifndef GLN_BACKEND_CUDA_CUTLASS_GROUPED_BLOCKWISE_SM90_CUH
#define GLN_BACKEND_CUDA_CUTLASS_GROUPED_BLOCKWISE_SM90_CUH

#include "backend/cuda/cutlass/grouped_sm90.cuh"

#include <cutlass/detail/blockwise_scale_layout.hpp>

extern "C" {
#include "backend/cuda/cuda_grouped_blockwise.h"
}

namespace gln_cutlass_bw {

using gln_cutlass::align_up;
using gln_cutlass::Chunk;
using gln_cutlass::packed_stride;

/* One instantiation: E4M3 × E4M3, A row-major [M, K], B K-major [N, K]; scale granularity 1 along M
 * and SfN along N (128: weights; 1: wgrad's token-blocked copies), 128 along K; the cooperative
 * schedule (two consumer warpgroups share a tile) or the pingpong one (each takes its own tile,
 * one's epilogue and scale promotion overlapping the other's MMAs). */
template <class ED, int SfN, class Tile, class Cluster_, bool WithBias,
          class KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise,
          class EpiSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>
struct Blockwise {
    static constexpr bool kBias = WithBias;
    static constexpr int kSfN = SfN;
    using ElementA = cutlass::float_e4m3_t;
    using ElementB = cutlass::float_e4m3_t;
    using ElementD = ED;
    using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
    using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, SfN, GLN_BLOCKWISE_K>;
    using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
    using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());
    static constexpr int kAlignD = 16 / (int)sizeof(ED);

    using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster_,
        cutlass::epilogue::collective::EpilogueTileAuto, float, float, ED, cutlass::layout::RowMajor *, kAlignD, ED,
        cutlass::layout::RowMajor *, kAlignD, EpiSchedule,
        cute::conditional_t<WithBias, gln_cutlass::BiasEpilogue<ED, Tile>,
                            gln_cutlass::fusion::LinearCombination<ED, float>>>::CollectiveOp;

    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA,
        cute::tuple<cutlass::layout::RowMajor *, LayoutSFA *>, 16, ElementB,
        cute::tuple<cutlass::layout::ColumnMajor *, LayoutSFB *>, 16, float, Tile, Cluster_,
        cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
            sizeof(typename Epilogue::SharedStorage))>,
        KernelSchedule>::CollectiveOp;

    using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
    using StrideA = typename Kernel::InternalStrideA;
    using StrideB = typename Kernel::InternalStrideB;
    using StrideD = typename Kernel::InternalStrideD;
    using Shape = typename ProblemShape::UnderlyingProblemShape;
};

/* The per-expert tables the setup kernel fills, carved out of one scratch allocation. */
template <class G> struct Tables {
    typename G::Shape *shapes;
    const typename G::ElementA **a;
    const typename G::ElementB **b;
    typename G::ElementD **d;
    typename G::StrideA *sa;
    typename G::StrideB *sb;
    typename G::StrideD *sd;
    float *alpha; /* 1: the scales are applied in the mainloop */
    const float **alpha_ptr;
    const cutlass::bfloat16_t **bias;
    const float **sfa, **sfb;
    typename G::LayoutSFA *lsfa;
    typename G::LayoutSFB *lsfb;
    float *sfa_repacked, *sfb_repacked; /* TN / NN: the repack targets */
};

template <class G>
__global__ void blockwise_setup_kernel(Tables<G> t, gln_cutlass_blockwise_t bw, Chunk c) {
    gln_pdl_wait(); /* as gln_cutlass::setup_kernel */
    gln_pdl_launch_dependents();
    const int32_t j = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (j >= c.count) return;
    const gln_cutlass_grouped_t &g = bw.g;
    const int32_t i = c.first + j;
    const int64_t r0 = g.offsets[i], rows = g.offsets[i + 1] - r0;
    int64_t m, k;
    const char *a, *b;
    /* a padded wgrad expert keeps its K blocks, so its scales stay where they are */
    gln_cutlass::expert_operands(g, i, c.b[j], &m, &k, &a, &b);
    const typename G::Shape shape{(int)m, (int)g.n, (int)k};
    t.shapes[i] = shape;
    t.a[i] = (const typename G::ElementA *)a;
    t.b[i] = (const typename G::ElementB *)b;
    t.d[i] = (typename G::ElementD *)(g.split_is_k ? (char *)c.d[j] : (char *)g.d + r0 * g.d_row_bytes);
    t.sa[i] = packed_stride<typename G::StrideA>(k);
    t.sb[i] = packed_stride<typename G::StrideB>(k);
    t.sd[i] = packed_stride<typename G::StrideD>(g.n);
    t.alpha[i] = 1.0f;
    t.alpha_ptr[i] = &t.alpha[i];
    if (G::kBias) t.bias[i] = (const cutlass::bfloat16_t *)c.bias[j];
    if (g.split_is_k) { /* both copies' scales in place: [kb · cols + c], cols % 4 == 0 */
        t.sfa[i] = bw.a_sf + bw.a_sf_start[i];
        t.sfb[i] = bw.b_sf + bw.b_sf_start[i];
    } else { /* x / dy in place when [kb · round_up(m, 4) + r] is [kb · m + r]; W repacked */
        const int64_t nkb = (g.k + GLN_BLOCKWISE_K - 1) / GLN_BLOCKWISE_K;
        const int64_t nnb = (g.n + GLN_BLOCKWISE_K - 1) / GLN_BLOCKWISE_K;
        t.sfa[i] = rows % 4 == 0 ? bw.a_sf + bw.a_sf_start[i] : t.sfa_repacked + r0 * nkb;
        t.sfb[i] = t.sfb_repacked + (int64_t)i * nkb * nnb;
    }
    /* not read by this mainloop (it derives the layouts from the shapes), filled for completeness */
    t.lsfa[i] = G::ScaleConfig::tile_atom_to_shape_SFA(cute::make_shape((int)m, (int)g.n, (int)k, 1));
    t.lsfb[i] = G::ScaleConfig::tile_atom_to_shape_SFB(cute::make_shape((int)m, (int)g.n, (int)k, 1));
}

/* Run one block-scaled grouped GEMM of instantiation G on the context's stream: repacks, setup,
 * (zeroing of empty wgrads), the CUTLASS kernel.  Every size was checked by the caller
 * (cuda_grouped_blockwise.c). */
template <class G> gln_status_t run(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw, const char *fn) {
    using Gemm = gln_cutlass::PdlGemm<G>;
    const gln_cutlass_grouped_t *g = &bw->g;
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    const size_t n = (size_t)g->num;
    const size_t nkb = (size_t)((g->k + GLN_BLOCKWISE_K - 1) / GLN_BLOCKWISE_K);
    const size_t nnb = (size_t)((g->n + GLN_BLOCKWISE_K - 1) / GLN_BLOCKWISE_K);
    const int tn = !g->split_is_k;
    enum { kTables = 16 };
    size_t off[kTables + 1];
    size_t bytes = 0;
    const size_t sizes[kTables] = {sizeof(typename G::Shape) * n,
                                   sizeof(void *) * n,
                                   sizeof(void *) * n,
                                   sizeof(void *) * n,
                                   sizeof(typename G::StrideA) * n,
                                   sizeof(typename G::StrideB) * n,
                                   sizeof(typename G::StrideD) * n,
                                   sizeof(float) * n,
                                   sizeof(void *) * n,
                                   sizeof(void *) * n,
                                   sizeof(void *) * n,
                                   sizeof(void *) * n,
                                   sizeof(typename G::LayoutSFA) * n,
                                   sizeof(typename G::LayoutSFB) * n,
                                   tn ? sizeof(float) * (size_t)bw->packed_rows * nkb : 0,
                                   tn ? sizeof(float) * n * nkb * nnb : 0};
    for (int t = 0; t < kTables; t++) off[t] = bytes, bytes = align_up(bytes + sizes[t]);
    off[kTables] = bytes;

    int device = 0, sm_count = 0;
    GLN_TRY(gln_cuda_check(cudaGetDevice(&device), fn, "cudaGetDevice"));
    GLN_TRY(gln_cuda_check(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device), fn,
                           "cudaDeviceGetAttribute(multiprocessor count)"));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = device;
    hw.sm_count = sm_count;

    char *scratch = NULL;
    Tables<G> t;
    auto make_args = [&](char *base) {
        t.shapes = (typename G::Shape *)(base + off[0]);
        t.a = (const typename G::ElementA **)(base + off[1]);
        t.b = (const typename G::ElementB **)(base + off[2]);
        t.d = (typename G::ElementD **)(base + off[3]);
        t.sa = (typename G::StrideA *)(base + off[4]);
        t.sb = (typename G::StrideB *)(base + off[5]);
        t.sd = (typename G::StrideD *)(base + off[6]);
        t.alpha = (float *)(base + off[7]);
        t.alpha_ptr = (const float **)(base + off[8]);
        t.bias = (const cutlass::bfloat16_t **)(base + off[9]);
        t.sfa = (const float **)(base + off[10]);
        t.sfb = (const float **)(base + off[11]);
        t.lsfa = (typename G::LayoutSFA *)(base + off[12]);
        t.lsfb = (typename G::LayoutSFB *)(base + off[13]);
        t.sfa_repacked = (float *)(base + off[14]);
        t.sfb_repacked = (float *)(base + off[15]);
        typename Gemm::Arguments args;
        decltype(args.epilogue.thread) ep{};
        const float beta = g->accumulate ? 1.0f : 0.0f;
        if constexpr (G::kBias) {
            /* the tree's nodes in order: beta, C, (alpha, acc, bias, +), + */
            ep.op_0.scalars[0] = beta;
            ep.op_2.op_0.scalar_ptr_arrays[0] = t.alpha_ptr;
            ep.op_2.op_0.dScalar[0] = {cute::_0{}, cute::_0{}, 1};
            ep.op_2.op_2.ptr_row = g->bias_list ? t.bias : nullptr;
        } else {
            ep.alpha = 1.0f;
            ep.beta = beta;
            ep.alpha_ptr = nullptr;
            ep.beta_ptr = nullptr;
            ep.alpha_ptr_array = nullptr;
            ep.beta_ptr_array = nullptr;
            ep.dAlpha = {cute::_0{}, cute::_0{}, 0};
            ep.dBeta = {cute::_0{}, cute::_0{}, 0};
        }
        args = typename Gemm::Arguments{cutlass::gemm::GemmUniversalMode::kGrouped,
                                        {(int)g->num, t.shapes, nullptr},
                                        {t.a, t.sa, t.b, t.sb, t.sfa, t.lsfa, t.sfb, t.lsfb},
                                        {ep, (const typename G::ElementD **)t.d, t.sd, t.d, t.sd},
                                        hw};
        gln_cutlass::set_scheduler<typename G::Kernel>(args, *g);
        return args;
    };
    const size_t ws_bytes = Gemm::get_workspace_size(make_args((char *)256));
    GLN_TRY(gln_cuda_scratch_alloc(ctx, off[kTables] + ws_bytes + 256, (void **)&scratch, fn));
    gln_status_t st = GLN_STATUS_SUCCESS;
    typename Gemm::Arguments args = make_args(scratch);
    void *workspace = ws_bytes ? scratch + off[kTables] : nullptr;
    Gemm gemm;

    for (int32_t first = 0; first < g->num; first += GLN_CUTLASS_CHUNK) {
        Chunk c;
        gln_cutlass::fill_chunk(&c, g, first);
        if (tn) GLN_CHECK(st, fail, gln_cuda_blockwise_repack(ctx, bw, first, c.count, t.sfa_repacked, t.sfb_repacked, fn));
        GLN_CHECK(st, fail,
                  gln_cuda_check(gln_cutlass::launch_aux(blockwise_setup_kernel<G>, dim3(1), dim3(GLN_CUTLASS_CHUNK),
                                                         stream, t, *bw, c),
                                 fn, "gln_cutlass_bw blockwise_setup_kernel"));
        GLN_CHECK(st, fail, gln_cutlass::launch_zero_empty<typename G::ElementD>(g, c, stream, fn));
    }
    GLN_CHECK(st, fail, gln_cutlass::cutlass_status(gemm.can_implement(args), fn, "can_implement"));
    GLN_CHECK(st, fail, gln_cutlass::cutlass_status(gemm.initialize(args, workspace, stream), fn, "initialize"));
    GLN_CHECK(st, fail, gln_cutlass::cutlass_status(gemm.run(stream, nullptr, gln_cutlass::gemm_pdl_enabled()), fn, "run"));
    GLN_CHECK(st, fail, gln_cuda_check_launch(fn, "CUTLASS block-scaled grouped GEMM"));
fail:
    gln_cuda_scratch_free(ctx, scratch);
    return st;
}

} // namespace gln_cutlass_bw

/* One instantiation and its C entry point gln_cutlass_run_<name>() (cuda_grouped_blockwise.h). */
#define GLN_CUTLASS_BLOCKWISE(name, ...)                                                                       \
    using GlnBlockwise_##name = gln_cutlass_bw::Blockwise<__VA_ARGS__>;                                 \
    extern "C" gln_status_t gln_cutlass_run_##name(gln_context_t *ctx, const gln_cutlass_blockwise_t *bw,      \
                                                   const char *call) {                                         \
        return gln_cutlass_bw::run<GlnBlockwise_##name>(ctx, bw, call);                                 \
    }

#endif

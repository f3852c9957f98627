/* Hopper grouped GEMMs on CUTLASS's ptr-array kernels (TMA + warpgroup MMA, warp-specialized,
 * persistent), driven entirely from the device: a setup kernel turns the group plan's row
 * offsets into the per-expert problem shapes, operand pointers, strides and alphas, so the GEMM
 * gets no host problem shapes and nothing waits for the host (the launch captures in a graph).
 *
 * Each instantiation lives in its own .cu file of this folder (they compile in parallel) and
 * exports one C entry point gln_cutlass_run_<name>(); cuda_grouped_gemm.c picks the kernel.
 *
 * In CUTLASS's terms every expert i computes D_i [M_i, N] = alpha_i · A_i [M_i, K_i] · B_i [K_i, N]
 * (+ beta · D_i), D row-major; exactly one of M_i, K_i is the expert's row count (see
 * gln_cutlass_grouped_t in cuda_backend.h).  Empty experts get an M = 0 problem, which the
 * persistent tile scheduler skips: none of their rows is touched.  A wgrad (K_i = rows) of an
 * empty expert without accumulation is zeroed by a separate small kernel instead. */
#ifndef GLN_BACKEND_CUDA_CUTLASS_GROUPED_SM90_CUH
#define GLN_BACKEND_CUDA_CUTLASS_GROUPED_SM90_CUH

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>
#include <utility>

extern "C" {
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"
}
#include "backend/cuda/cuda_pdl.cuh"

namespace gln_cutlass {

using cute::_1;

namespace fusion = cutlass::epilogue::fusion;

/* The fprop epilogue: D = beta·C + (alpha_i·acc + bias_i[n]) in FP32, one rounding to ED.  The
 * bias is a per-expert row of EBias (bf16, or fp16 with fp16 outputs), widened to FP32; a pointer
 * per group; a null pointer array means no bias. */
template <class ED, class Tile, class EBias = cutlass::bfloat16_t>
using BiasEpilogue = fusion::Sm90EVT<
    fusion::Sm90Compute<cutlass::homogeneous_multiply_add, ED, float, cutlass::FloatRoundStyle::round_to_nearest>,
    fusion::Sm90ScalarBroadcastPtrArray<float, cute::Stride<cute::_0, cute::_0, int64_t>>, /* beta */
    fusion::Sm90SrcFetch<ED>,                                                              /* C */
    fusion::Sm90EVT<
        fusion::Sm90Compute<cutlass::homogeneous_multiply_add, float, float, cutlass::FloatRoundStyle::round_to_nearest>,
        fusion::Sm90ScalarBroadcastPtrArray<float, cute::Stride<cute::_0, cute::_0, int64_t>>, /* alpha_i */
        fusion::Sm90AccFetch,                                                                  /* acc */
        fusion::Sm90RowBroadcast<0, Tile, EBias *, float>>>;                                   /* bias_i */

/* One grouped-GEMM instantiation: operand types and layouts, tile and cluster shapes, schedules,
 * whether the epilogue adds a per-expert bias (the fprop kernels), the bias's element type, and the
 * epilogue subtile (EpilogueTileAuto: the builder's choice; the builder then also derives the
 * epilogue's C / D stage counts from the subtile). */
template <class EA, class LA, class EB, class LB, class ED, class Tile, class Cluster_, class KernelSchedule,
          class EpiSchedule, bool WithBias = false, class EBias = cutlass::bfloat16_t,
          class EpiTile = cutlass::epilogue::collective::EpilogueTileAuto>
struct Grouped {
    static constexpr bool kBias = WithBias;
    using ElementBias = EBias;
    using ElementA = EA;
    using ElementB = EB;
    using ElementD = ED;
    using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
    using TileShape = Tile;
    using Cluster = Cluster_;
    static constexpr int kAlignA = 16 / (int)sizeof(EA);
    static constexpr int kAlignB = 16 / (int)sizeof(EB);
    static constexpr int kAlignD = 16 / (int)sizeof(ED);

    using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
        EpiTile, float, float, ED, cutlass::layout::RowMajor *, kAlignD, ED,
        cutlass::layout::RowMajor *, kAlignD, EpiSchedule,
        cute::conditional_t<WithBias, BiasEpilogue<ED, Tile, EBias>,
                            fusion::LinearCombination<ED, float>>>::CollectiveOp;

    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, EA, LA *, kAlignA, EB, LB *, kAlignB, float, Tile,
        Cluster,
        cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
            sizeof(typename Epilogue::SharedStorage))>,
        KernelSchedule>::CollectiveOp;

    using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
    using StrideA = typename Kernel::InternalStrideA;
    using StrideB = typename Kernel::InternalStrideB;
    using StrideD = typename Kernel::InternalStrideD;
    using Shape = typename ProblemShape::UnderlyingProblemShape;
};

/* Programmatic dependent launch for the GEMM (cuda_pdl.cuh): CUTLASS 4.2's sm90 ptr-array kernels
 * never call griddepcontrol.wait, so a PDL launch of them would let their loads run ahead of the
 * setup kernel's tables.  This kernel type waits first (the prerequisite grids complete and their
 * writes are visible) and then lets the next kernel of the stream be scheduled, whose blocks then
 * take each SM as soon as this GEMM's persistent block on it retires.  What overlaps: the GEMM's
 * launch and block arrival with the setup kernel, and the next kernel's with the GEMM's last tiles.
 * Without the PDL attribute the wait returns at once. */
template <class Base> struct PdlKernel : Base {
    CUTLASS_DEVICE void operator()(typename Base::Params const &params, char *smem) {
        gln_pdl_wait();
        gln_pdl_launch_dependents();
        Base::operator()(params, smem);
    }
};
/* The device adapter of G's kernel with the PDL wait. */
template <class G> using PdlGemm = cutlass::gemm::device::GemmUniversalAdapter<PdlKernel<typename G::Kernel>>;

/* Launch the grouped kernels with PDL unless GLN_CUDA_PDL=0 (every PDL launch of the library);
 * read at every call. */
inline bool gemm_pdl_enabled() { return gln_cuda_pdl_enabled(); }
/* Launch a setup / zeroing kernel of a grouped GEMM (one that begins with gln_pdl_wait and
 * gln_pdl_launch_dependents) under gemm_pdl_enabled(). */
template <class... Params, class... Args>
inline cudaError_t launch_aux(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args &&...args) {
    return gln_cuda_launch_pdl(gemm_pdl_enabled(), kernel, grid, block, 0, stream, static_cast<Args &&>(args)...);
}

/* A packed stride of a rank-3 (rows, cols, batch) CUTLASS stride type: the one dynamic mode of
 * the first two gets the leading dimension. */
template <class Stride> __host__ __device__ inline Stride packed_stride(int64_t ld) {
    Stride s{};
    if constexpr (cute::is_static<cute::remove_cvref_t<decltype(cute::get<1>(s))>>::value)
        cute::get<0>(s) = ld;
    else
        cute::get<1>(s) = ld;
    return s;
}
/* Is the mode-0 (M or N) index the contiguous one of this stride (an M- / N-major operand)? */
template <class Stride> constexpr bool mode0_contiguous() {
    return cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(Stride{}))>>::value;
}

/* The per-expert tables the setup kernel fills, carved out of one scratch allocation. */
template <class G> struct Tables {
    typename G::Shape *shapes;
    const typename G::ElementA **a;
    const typename G::ElementB **b;
    typename G::ElementD **d;
    typename G::StrideA *sa;
    typename G::StrideB *sb;
    typename G::StrideD *sd;
    float *alpha;
    const float **alpha_ptr;
    const typename G::ElementBias **bias;
};

/* Per-expert host values of one setup launch (list pointers travel by value in the kernel
 * parameters: no host-to-device copy, so the launch captures in a graph).  256 experts a launch
 * (8 KB of parameters, within the 32 KB CUDA 12.1+ allows on sm_70 and later): one setup launch
 * for every usual expert count, where each extra launch costs a few microseconds that the
 * small-expert GEMMs (~0.1 ms) feel. */
#define GLN_CUTLASS_CHUNK 256
struct Chunk {
    int32_t first, count;
    const void *b[GLN_CUTLASS_CHUNK];
    void *d[GLN_CUTLASS_CHUNK];
    const float *b_scale[GLN_CUTLASS_CHUNK];
    const void *bias[GLN_CUTLASS_CHUNK];
};

/* Expert i's problem as the setup kernels see it: m and k (one of them its row count), and where
 * its grouped operands start (A always; B when split_is_k, else c_b, the expert's own B).  A wgrad
 * expert whose K stride TMA cannot read in place (rows not a multiple of g.k_align) reads the
 * zero-padded copies of gln_cuda_wgrad_pad (cuda_wgrad_pad.cu) at row offsets[i] + k_align · i with
 * K rounded up, or gets no tiles when there are none (m = 0: the caller computes it).  Shared by
 * setup_kernel and the block-scaled one (grouped_blockwise_sm90.cuh). */
__device__ __forceinline__ void expert_operands(const gln_cutlass_grouped_t &g, int32_t i, const void *c_b,
                                                int64_t *m_out, int64_t *k_out, const char **a_out,
                                                const char **b_out) {
    const int64_t r0 = g.offsets[i], rows = g.offsets[i + 1] - r0;
    int64_t m = g.split_is_k ? g.m : rows, k = g.split_is_k ? rows : g.k;
    if (k == 0) m = 0; /* nothing to multiply: no tiles (an empty wgrad is zeroed separately) */
    const char *a = (const char *)g.a + r0 * g.a_row_bytes;
    const char *b = g.split_is_k ? (const char *)g.b + r0 * g.b_row_bytes : (const char *)c_b;
    if (g.split_is_k && g.k_align > 1 && k % g.k_align) {
        if (g.a_pad) {
            const int64_t p0 = r0 + (int64_t)g.k_align * i;
            k = (k + g.k_align - 1) / g.k_align * g.k_align;
            a = (const char *)g.a_pad + p0 * g.a_row_bytes;
            b = (const char *)g.b_pad + p0 * g.b_row_bytes;
        } else {
            m = 0;
        }
    }
    *m_out = m, *k_out = k, *a_out = a, *b_out = b;
}

template <class G>
__global__ void setup_kernel(Tables<G> t, gln_cutlass_grouped_t g, Chunk c) {
    gln_pdl_wait(); /* the offsets' writer, and the previous GEMM's reads of this scratch, first */
    gln_pdl_launch_dependents();
    const int32_t j = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (j >= c.count) return;
    const int32_t i = c.first + j;
    const int64_t r0 = g.offsets[i];
    int64_t m, k;
    const char *a, *b;
    expert_operands(g, i, c.b[j], &m, &k, &a, &b);
    t.shapes[i] = typename G::Shape{(int)m, (int)g.n, (int)k};
    t.a[i] = (const typename G::ElementA *)a;
    t.b[i] = (const typename G::ElementB *)b;
    t.d[i] = (typename G::ElementD *)(g.split_is_k ? (char *)c.d[j] : (char *)g.d + r0 * g.d_row_bytes);
    t.sa[i] = packed_stride<typename G::StrideA>(mode0_contiguous<typename G::StrideA>() ? m : k);
    t.sb[i] = packed_stride<typename G::StrideB>(mode0_contiguous<typename G::StrideB>() ? g.n : k);
    t.sd[i] = packed_stride<typename G::StrideD>(g.n);
    /* FP8: the two decode scales multiplied first, then applied to the FP32 accumulator (the
     * CPU backend's (scale_a · scale_b) · acc). */
    float alpha = g.a_scale ? g.a_scale[i] : 1.0f;
    if (c.b_scale[j]) alpha *= *c.b_scale[j];
    t.alpha[i] = alpha;
    t.alpha_ptr[i] = &t.alpha[i];
    if (G::kBias) t.bias[i] = (const typename G::ElementBias *)c.bias[j];
}

/* D_i = 0 for the experts of a wgrad (K_i = rows) that got no rows, without accumulation. */
template <class ED>
__global__ void zero_empty_kernel(gln_cutlass_grouped_t g, Chunk c) {
    gln_pdl_wait();
    gln_pdl_launch_dependents();
    const int32_t j = (int32_t)blockIdx.y, i = c.first + j;
    if (g.offsets[i + 1] != g.offsets[i]) return;
    const int64_t count = g.m * g.n;
    ED *d = (ED *)c.d[j];
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x)
        d[e] = ED(0);
}

/* zero_empty_kernel over one chunk, for a wgrad (split along K) without accumulation. */
template <class ED>
inline gln_status_t launch_zero_empty(const gln_cutlass_grouped_t *g, const Chunk &c, cudaStream_t stream,
                                      const char *fn) {
    if (!g->split_is_k || g->accumulate) return GLN_STATUS_SUCCESS;
    const int64_t count = g->m * g->n;
    const unsigned int blocks = (unsigned int)(count / 256 + 1 < 64 ? count / 256 + 1 : 64);
    return gln_cuda_check(launch_aux(zero_empty_kernel<ED>, dim3(blocks, (unsigned int)c.count), dim3(256), stream, *g, c),
                          fn, "gln_cutlass zero_empty_kernel");
}

static inline size_t align_up(size_t x) { return (x + 255) & ~(size_t)255; }

/* The order in which the persistent group scheduler hands out one expert's tiles.
 *
 * Tiles handed out along M (consecutive tiles share an N column) keep the N-side operand's tile
 * in use by the CTAs running together while each reads its own M-side tile: the M-side operand is
 * streamed once per N column.  Along N it is the other way round.  So the order walks the
 * dimension with fewer tiles, and the operand re-read is the smaller one, which then stays in L2
 * (50 MB): the Mixtral-like wgrad (dW_i [14336, 4096], 112 × 32 tiles of 128) handed out along M
 * streamed dy_iᵀ (58.7 MB in E4M3, 117 MB in bf16: more than L2) from DRAM once per one of the 32
 * N columns; along N, dy_iᵀ is read once and x_iᵀ (16.8 MB) is what repeats.  The tile counts
 * come from shapes the host knows: N, and M (wgrad: the weights' rows) or, for fprop / dgrad, the
 * average rows per expert (g.split_rows / g.num; the device splits are never read); ties and
 * unknown shapes go along M.
 *
 * Environment, for sweeps and the kernel lab (read once per process; an unset or unknown value
 * keeps the rule above):
 *   GLN_CUTLASS_RASTER=m | n | auto   force along M, along N, or CUTLASS's own heuristic (with the
 *       problem shapes on the device the group scheduler's grid is (SM count × 1), so `auto`
 *       always resolves to along N).
 * The swizzle stays 1: CUTLASS 4.2's group scheduler derives the swizzle it applies from that same
 * (tiles × 1) grid, whose smaller extent is 1, so get_log_swizzle_size() returns 0 whatever the
 * maximum asked. */
/* -1 the shape rule, 0 along M, 1 along N, 2 CUTLASS's heuristic */
inline int scheduler_raster() {
    static const int raster = [] {
        const char *r = getenv("GLN_CUTLASS_RASTER");
        if (r && !strcmp(r, "m")) return 0;
        if (r && !strcmp(r, "n")) return 1;
        if (r && !strcmp(r, "auto")) return 2;
        return -1;
    }();
    return raster;
}

/* The shape rule above: 1 (along N) when one expert has fewer N tiles than M tiles. */
inline int raster_along_n(const gln_cutlass_grouped_t &g, int tile_m, int tile_n) {
    const int64_t rows = g.split_is_k ? g.m : g.num > 0 ? g.split_rows / g.num : 0;
    if (rows <= 0 || g.n <= 0) return 0;
    const int64_t tiles_m = (rows + tile_m - 1) / tile_m, tiles_n = (g.n + tile_n - 1) / tile_n;
    return tiles_n < tiles_m;
}

/* The order and swizzle (1) into one kernel's scheduler arguments (every grouped kernel we launch;
 * Kernel: the CUTLASS kernel type, whose CTA tile gives the tile counts). */
template <class Kernel, class Args> inline void set_scheduler(Args &args, const gln_cutlass_grouped_t &g) {
    using Raster = decltype(args.scheduler.raster_order);
    const int forced = scheduler_raster();
    const int raster = forced >= 0 ? forced
                                   : raster_along_n(g, cute::size<0>(typename Kernel::TileShape{}),
                                                    cute::size<1>(typename Kernel::TileShape{}));
    args.scheduler.raster_order = raster == 1 ? Raster::AlongN : raster == 2 ? Raster::Heuristic : Raster::AlongM;
    args.scheduler.max_swizzle_size = 1;
}

static inline gln_status_t cutlass_status(cutlass::Status s, const char *fn, const char *what) {
    if (s == cutlass::Status::kSuccess) return GLN_STATUS_SUCCESS;
    return gln_fail(GLN_STATUS_BACKEND_ERROR, "%s: CUTLASS %s failed: %s", fn, what, cutlassGetStatusString(s));
}

static inline void fill_chunk(Chunk *c, const gln_cutlass_grouped_t *g, int32_t first) {
    memset(c, 0, sizeof *c);
    c->first = first;
    c->count = g->num - first < GLN_CUTLASS_CHUNK ? g->num - first : GLN_CUTLASS_CHUNK;
    for (int32_t j = 0; j < c->count; j++) {
        if (g->b_list) c->b[j] = g->b_list[first + j];
        if (g->d_list) c->d[j] = g->d_list[first + j];
        if (g->b_scale_list) c->b_scale[j] = g->b_scale_list[first + j];
        if (g->bias_list) c->bias[j] = g->bias_list[first + j];
    }
}

/* The FP8 main loops that promote to FP32 (not the fast-accumulating ones) take the number of
 * MMAs between promotions; g->promotion_k (the kernel lab's knob) sets it in K elements. */
template <class MainloopArgs, class = void> struct has_promotion : std::false_type {};
template <class MainloopArgs>
struct has_promotion<MainloopArgs, std::void_t<decltype(std::declval<MainloopArgs &>().mma_promotion_interval)>>
    : std::true_type {};
/* An instantiation whose main loop promotes after every K tile whatever its arguments say
 * declares kFixedPromotion = true (grouped_fp8_overlap.cuh). */
template <class G, class = void> struct fixed_promotion : std::false_type {};
template <class G> struct fixed_promotion<G, std::void_t<decltype(G::kFixedPromotion)>>
    : std::bool_constant<G::kFixedPromotion> {};
template <class MainloopArgs> inline void set_promotion(MainloopArgs &m, const gln_cutlass_grouped_t &g) {
    if constexpr (has_promotion<MainloopArgs>::value) {
        if (g.promotion_k > 0) m.mma_promotion_interval = (uint32_t)(g.promotion_k / 32); /* 32: an FP8 MMA's K */
    }
}

/* Run one grouped GEMM of instantiation G on the context's stream: setup, (zeroing of empty
 * wgrads), the CUTLASS kernel.  Every size was checked by the caller (cuda_grouped_gemm.c). */
template <class G> gln_status_t run(gln_context_t *ctx, const gln_cutlass_grouped_t *g, const char *fn) {
    using Gemm = PdlGemm<G>;
    cudaStream_t stream = gln_cuda_state(ctx)->stream;
    constexpr int tile_k = cute::size<2>(typename G::TileShape{});
    if (g->promotion_k < 0 || g->promotion_k % tile_k)
        return gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: promotion_k %d is not a multiple of the tile's K (%d)", fn,
                        (int)g->promotion_k, tile_k);
    if (fixed_promotion<G>::value && g->promotion_k && g->promotion_k != tile_k)
        return gln_fail(GLN_STATUS_NOT_SUPPORTED, "%s: promotion_k %d: this kernel promotes every %d K elements", fn,
                        (int)g->promotion_k, tile_k);
    const size_t n = (size_t)g->num;
    enum { kTables = 10 };
    size_t off[kTables + 1];
    size_t bytes = 0;
    const size_t sizes[kTables] = {sizeof(typename G::Shape),   sizeof(void *),
                                   sizeof(void *),              sizeof(void *),
                                   sizeof(typename G::StrideA), sizeof(typename G::StrideB),
                                   sizeof(typename G::StrideD), sizeof(float),
                                   sizeof(void *),              sizeof(void *)};
    for (int t = 0; t < kTables; t++) off[t] = bytes, bytes = align_up(bytes + sizes[t] * n);
    off[kTables] = bytes;

    int device = 0, sm_count = 0;
    GLN_TRY(gln_cuda_check(cudaGetDevice(&device), fn, "cudaGetDevice"));
    GLN_TRY(gln_cuda_check(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device), fn,
                           "cudaDeviceGetAttribute(multiprocessor count)"));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = device;
    hw.sm_count = sm_count;

    /* Arguments first (pointers into the tables are fixed once the scratch exists), so the
     * workspace size can be asked before allocating. */
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
        t.bias = (const typename G::ElementBias **)(base + off[9]);
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
            ep.alpha = 0.0f;
            ep.beta = beta;
            ep.alpha_ptr = nullptr;
            ep.beta_ptr = nullptr;
            ep.alpha_ptr_array = t.alpha_ptr;
            ep.beta_ptr_array = nullptr;
            ep.dAlpha = {cute::_0{}, cute::_0{}, 1};
            ep.dBeta = {cute::_0{}, cute::_0{}, 0};
        }
        args = typename Gemm::Arguments{cutlass::gemm::GemmUniversalMode::kGrouped,
                                        {(int)g->num, t.shapes, nullptr},
                                        {t.a, t.sa, t.b, t.sb},
                                        {ep, (const typename G::ElementD **)t.d, t.sd, t.d, t.sd},
                                        hw};
        set_scheduler<typename G::Kernel>(args, *g);
        set_promotion(args.mainloop, *g);
        return args;
    };
    /* The workspace size depends only on the group count and the device, not on addresses. */
    const size_t ws_bytes = Gemm::get_workspace_size(make_args((char *)256));
    GLN_TRY(gln_cuda_scratch_alloc(ctx, off[kTables] + ws_bytes + 256, (void **)&scratch, fn));
    gln_status_t st = GLN_STATUS_SUCCESS;
    typename Gemm::Arguments args = make_args(scratch);
    void *workspace = ws_bytes ? scratch + off[kTables] : nullptr;
    Gemm gemm;

    for (int32_t first = 0; first < g->num; first += GLN_CUTLASS_CHUNK) {
        Chunk c;
        fill_chunk(&c, g, first);
        GLN_CHECK(st, fail, gln_cuda_check(launch_aux(setup_kernel<G>, dim3(1), dim3(GLN_CUTLASS_CHUNK), stream, t, *g, c),
                                           fn, "gln_cutlass setup_kernel"));
        GLN_CHECK(st, fail, launch_zero_empty<typename G::ElementD>(g, c, stream, fn));
    }
    GLN_CHECK(st, fail, cutlass_status(gemm.can_implement(args), fn, "can_implement"));
    GLN_CHECK(st, fail, cutlass_status(gemm.initialize(args, workspace, stream), fn, "initialize"));
    GLN_CHECK(st, fail, cutlass_status(gemm.run(stream, nullptr, gemm_pdl_enabled()), fn, "run"));
    GLN_CHECK(st, fail, gln_cuda_check_launch(fn, "CUTLASS grouped GEMM"));
fail:
    gln_cuda_scratch_free(ctx, scratch);
    return st;
}

} // namespace gln_cutlass

/* One instantiation and its C entry point gln_cutlass_run_<name>() (declared in cuda_backend.h):
 * GLN_CUTLASS_GROUPED(name, <the gln_cutlass::Grouped template arguments>). */
#define GLN_CUTLASS_GROUPED(name, ...)                                                                         \
    using GlnGrouped_##name = gln_cutlass::Grouped<__VA_ARGS__>;                                               \
    extern "C" gln_status_t gln_cutlass_run_##name(gln_context_t *ctx, const gln_cutlass_grouped_t *g,         \
                                                   const char *call) {                                         \
        return gln_cutlass::run<GlnGrouped_##name>(ctx, g, call);                                              \
    }

#endif

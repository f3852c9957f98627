/* The per-tensor FP8 wgrad into the FP32 main_grad for experts below the large regime
 * (GLN_CUTLASS_E4M3_WGRAD / GLN_CUTLASS_E5M2_E4M3_WGRAD operands as grouped_e4m3_wgrad.cu: both
 * transposed copies, FP32 promotion in the main loop): the PINGPONG ptr-array kernel, so that one
 * warpgroup's main_grad epilogue runs under the other's main loop.  The promoted main loop keeps
 * a second FP32 accumulator, so one warpgroup's tile is 64 × 128 (128 × 128 would need 256
 * accumulator registers a thread), with 64 × 64 epilogue subtiles (the bf16 pingpong wgrad's,
 * which move the cooperative kernel's main_grad bytes per step).  EDy: the gradient's FP8 type
 * (E4M3, or E5M2 under HYBRID); x is E4M3.
 *
 * Kernel lab (bench/lab/grouped_tiles --recipe e4m3|hybrid --stage wgrad, each checked bit for
 * bit against the CPU first), H200, 2026-12-04, E4M3 / HYBRID against the cooperative 128 × 128
 * kernel: DeepSeek-like (32 experts × 512 rows) 1.195 / 1.176 ms against 1.236 / 1.231;
 * Qwen3-like (128 × 128 rows) 0.497 / 0.508 against 0.525 / 0.516.  On Mixtral-like experts (4096
 * rows) it lost, 6.18 / 5.96 ms against 4.63 / 4.60: there the main loop dominates and a 64-row
 * tile streams more operand bytes per FLOP, so the large regime keeps the cooperative kernel. */
#ifndef GLN_BACKEND_CUDA_CUTLASS_GROUPED_FP8_WGRAD_PP_CUH
#define GLN_BACKEND_CUDA_CUTLASS_GROUPED_FP8_WGRAD_PP_CUH

#include "backend/cuda/cutlass/grouped_sm90.cuh"

template <class EDy>
using GlnFp8WgradPingpong =
    gln_cutlass::Grouped<EDy, cutlass::layout::RowMajor, cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, float,
                         cute::Shape<cute::_64, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                         cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong, false, cutlass::bfloat16_t,
                         cute::Shape<cute::_64, cute::_64>>;

#endif

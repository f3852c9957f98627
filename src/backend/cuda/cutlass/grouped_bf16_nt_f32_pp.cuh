/* The medium-regime grouped wgrad into the FP32 main_grad, bf16 (GLN_CUTLASS_BF16_NT_F32 operands:
 * dW_i [M, N] (+)= dy_i [K_i, M]ᵀ · x_i [K_i, N], beta = 1 accumulating): the PINGPONG ptr-array
 * kernel, 128×128 tiles per consumer warpgroup, no cluster, 64×64 epilogue subtiles (16 KB of
 * FP32; the builder then gives 4 C-load stages and 2 D stages, D staged in its C slot).
 *
 * Why: with a few hundred rows per expert (the wgrad's K) a tile's main loop is short and its
 * epilogue, which reads and writes 128×128 FP32 of main_grad, is as long; the cooperative kernel
 * runs the two one after the other, the pingpong kernel runs one warpgroup's epilogue under the
 * other's main loop.  The builder's own pingpong epilogue (64×32 subtiles) streams main_grad too
 * slowly for one warpgroup to carry it alone; 64×64 subtiles move the cooperative kernel's bytes
 * per step.  Kernel lab (bench/lab/lab_epi_pp_128x128_e64.cu, the same kernel type, asserted
 * there), H200, 2026-12-04: DeepSeek-like wgrad (32 experts × 512 rows, 2048 × 7168) 1.180 ms
 * against 1.438 for the cooperative 128×128 kernel this regime ran before (main_grad's read and
 * write alone take 0.91 ms); Qwen3-like 0.493 against the small regime's 0.495, so the small
 * regime keeps its cooperative 128×256 kernel.  Large experts (≥ 1024 rows) keep the cooperative
 * 128×128 kernel: their main loop dominates and the lab has not compared the two there. */
#ifndef GLN_BACKEND_CUDA_CUTLASS_GROUPED_BF16_NT_F32_PP_CUH
#define GLN_BACKEND_CUDA_CUTLASS_GROUPED_BF16_NT_F32_PP_CUH

#include "backend/cuda/cutlass/grouped_sm90.cuh"

using GlnWgradBf16Pingpong =
    gln_cutlass::Grouped<cutlass::bfloat16_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                         cutlass::layout::RowMajor, float, cute::Shape<cute::_128, cute::_128, cute::_64>,
                         cute::Shape<cute::_1, cute::_1, cute::_1>,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                         cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong, false, cutlass::bfloat16_t,
                         cute::Shape<cute::_64, cute::_64>>;

#endif

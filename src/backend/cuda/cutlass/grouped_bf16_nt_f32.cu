/* Grouped wgrad into the FP32 main_grad, bf16: dW_i [M, N] (+)= dy_i [K_i, M]ᵀ · x_i [K_i, N],
 * main_grad accumulated in the epilogue (beta = 1), no separate add pass (GLN_CUTLASS_BF16_NT_F32),
 * for the small and the large regime (the medium one runs grouped_bf16_nt_f32_pp.cuh):
 * cooperative 128×256×64 tiles, no cluster.
 *
 * Small experts (each expert's K = its row count, ≤ 256: one or a few K blocks per tile, bound by
 * main_grad's read and write in the epilogue): half the tiles of 128×128, so half the per-tile
 * expert switches and epilogue set-ups over the same main_grad bytes.  Kernel lab
 * (bench/lab/grouped_tiles --stage wgrad), H200: Qwen3-like (128 experts × 128 rows, K 2048,
 * N 768) 0.514 ms against 0.643 (pingpong 128×128), 0.550 (cooperative 128×128), 0.543 (256×128
 * on 1×2 clusters), 2026-12-03; main_grad's read and write alone take 0.39 ms there.
 * Large experts (≥ 1024 rows): the main loop dominates, and 128×256 streams 3/4 of 128×128's
 * operand bytes per FLOP.  Mixtral-like (8 × 4096 rows, dW_i 14336 × 4096), 2026-12-04, tiles
 * handed out along N (grouped_sm90.cuh): 6.22 ms against 6.99 for the cooperative 128×128 kernel
 * the large regime ran before (now bench/lab/lab_nt.cu's control). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(bf16_nt_f32,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    float,
                    cute::Shape<cute::_128, cute::_256, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

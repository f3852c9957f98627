/* Grouped wgrad into the FP32 main_grad, bf16, many small experts (each expert's K = its row
 * count, ≤ 256: one or a few K blocks per tile, so the kernel is bound by reading and writing
 * main_grad in the epilogue): cooperative 128×256×64 tiles, no cluster — half the tiles of
 * 128×128, so half the per-tile expert switches and epilogue set-ups over the same main_grad
 * bytes.  Promoted from the kernel lab (bench/lab/lab_nt.cu) over the pingpong 128×128 kernel
 * this regime first had: Qwen3-like wgrad (128 experts × 128 rows, K 2048, N 768) 0.514 ms against
 * 0.643 (pingpong), 0.550 (cooperative 128×128), 0.543 (256×128 on 1×2 clusters) on the H200
 * (bench/RESULTS.md, 2026-12-03 third session); main_grad's read and write alone take 0.39 ms
 * there.  Otherwise as grouped_bf16_nt_f32.cu (GLN_CUTLASS_BF16_NT_F32, small-expert regime). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(bf16_nt_f32_small,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    float,
                    cute::Shape<cute::_128, cute::_256, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

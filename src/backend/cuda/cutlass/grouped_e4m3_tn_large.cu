/* Grouped per-tensor FP8 with FP32 promotion (the dgrad), E4M3 × E4M3, bf16 output, large
 * experts: cooperative 128×192×128 tiles, no cluster.  The promoted main loop holds its
 * accumulator twice, so a consumer warpgroup's share is at most 64 × 192 (96 + 96 FP32 registers
 * a thread); the wider tile reads 1.2× fewer operand bytes per FLOP than 128×128.  From the
 * kernel lab (bench/RESULTS.md, 2026-12-04, runs at ee03b23): Mixtral-like HYBRID dgrad 3.514 ms
 * against 3.694 for 128×128, DeepGEMM's E4M3 dgrad 1.722 against 1.834 (GLN_CUTLASS_E4M3_TN,
 * large tiles). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_tn_large,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_192, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

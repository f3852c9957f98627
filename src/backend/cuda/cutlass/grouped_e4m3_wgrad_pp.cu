/* Grouped per-tensor FP8 wgrad into the FP32 main_grad, E4M3 × E4M3, for experts below the large
 * regime (GLN_CUTLASS_E4M3_WGRAD operands as grouped_e4m3_wgrad.cu: both transposed copies,
 * FP32 promotion in the main loop): the PINGPONG ptr-array kernel, so that one warpgroup's
 * main_grad epilogue runs under the other's main loop.  The promoted main loop keeps a second
 * FP32 accumulator, so one warpgroup's tile is 64 × 128 (128 × 128 would need 256 accumulator
 * registers a thread), with 64 × 64 epilogue subtiles (the bf16 pingpong wgrad's, which move the
 * cooperative kernel's main_grad bytes per step).
 *
 * Kernel lab (bench/lab/grouped_tiles --recipe e4m3 --stage wgrad, each checked bit for bit
 * against the CPU first), H200, 2026-12-04, against the cooperative 128 × 128 kernel: DeepSeek-like
 * (32 experts × 512 rows) 1.195 ms against 1.236; Qwen3-like (128 × 128 rows) 0.497 against
 * 0.525–0.533.  On Mixtral-like experts (4096 rows) it lost, 6.18 ms against 4.63: there the main
 * loop dominates and a 64-row tile streams twice the operand bytes per FLOP, so the large regime
 * keeps the cooperative kernel. */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_wgrad_pp,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    float,
                    cute::Shape<cute::_64, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong, false, cutlass::bfloat16_t,
                    cute::Shape<cute::_64, cute::_64>)

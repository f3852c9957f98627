/* Grouped fprop, bf16, many small experts (≤ 256 rows each on average): the pingpong schedule —
 * two consumer warpgroups, each owning a whole 128×128×64 tile, so one tile's epilogue and its
 * switch to the next expert's TMA descriptors overlap the other tile's main loop (with a handful
 * of tiles per expert a CTA changes experts almost every tile) — and no cluster (an expert of
 * ≤ 128 rows has one M tile: nothing to multicast).  Otherwise as grouped_bf16_tn.cu, bias
 * epilogue included (GLN_CUTLASS_BF16_TN, small-expert regime; cuda_grouped_gemm.c). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(bf16_tn_small,
                    cutlass::bfloat16_t, cutlass::layout::RowMajor,
                    cutlass::bfloat16_t, cutlass::layout::ColumnMajor,
                    cutlass::bfloat16_t,
                    cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong,
                    true)

/* Grouped per-tensor FP8 fprop with fast accumulation into fp16 outputs (layers whose activations
 * are fp16), the per-expert bias an fp16 row (the layer's parameter dtype), added in FP32 before
 * the one rounding.  128×128×128 cooperative tiles for every regime: one instantiation per
 * output dtype is the budget (GLN_CUTLASS_E4M3_TN, fast accumulation, fp16 D). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_tn_fast_f16,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    cutlass::half_t,
                    cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                    true, cutlass::half_t)

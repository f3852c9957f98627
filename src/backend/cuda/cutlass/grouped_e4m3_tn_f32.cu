/* Grouped per-tensor FP8 dgrad (E4M3 × E4M3, FP32 promotion) into fp32 outputs (layers whose
 * activations are fp32); 128×128×128 cooperative tiles for every regime (GLN_CUTLASS_E4M3_TN,
 * promoted, fp32 D). */
#include "backend/cuda/cutlass/grouped_sm90.cuh"

GLN_CUTLASS_GROUPED(e4m3_tn_f32,
                    cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                    cutlass::float_e4m3_t, cutlass::layout::ColumnMajor,
                    float,
                    cute::Shape<cute::_128, cute::_128, cute::_128>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

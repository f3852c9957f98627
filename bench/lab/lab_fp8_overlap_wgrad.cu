/* Kernel-lab candidate: the E4M3 wgrad into the FP32 main_grad on the library's cooperative
 * 128×128 tile (its large regime) with the promotion overlapped with the next K tile's MMAs
 * (lab_fp8_overlap.cuh); control: the "large regime" row. */
#include "lab_fp8_overlap.cuh"

using GlnLabOverlapWgradTile = cute::Shape<cute::_128, cute::_128, cute::_128>;
using GlnLabOverlapWgradCluster = cute::Shape<cute::_1, cute::_1, cute::_1>;

GLN_LAB_FP8_OVERLAP(lab_e4m3_wgrad_overlap, cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t,
                    cutlass::layout::ColumnMajor, float, GlnLabOverlapWgradTile, GlnLabOverlapWgradCluster,
                    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                    cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)

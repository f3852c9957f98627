/* Kernel-lab candidate for the E4M3 wgrad into the FP32 main_grad of large experts
 * (bench/lab/lab_epi.cuh, GLN_CUTLASS_E4M3_WGRAD operands).  The library's kernel there is the
 * cooperative 128×128×128 one (grouped_e4m3_wgrad.cu): on Mixtral-like experts 4.23 ms against
 * 3.60 for cuBLASLt's per-expert loop (bench/RESULTS.md, 2026-12-04, runs at 36adfdf), a tile being
 * a ~15 µs main loop followed by 128 KB of main_grad read and written.  This candidate: 128×64
 * epilogue subtiles (32 KB TMA boxes, half as many per tile) in 2 C stages, D in its C slot — the
 * same 66 KB of epilogue shared memory, mainloop 5 stages.  Measured (H200, 2026-12-04, runs
 * at ee03b23, ms): 4.398 against the control's 4.282 — not promoted. */
#include "lab_epi.cuh"

using GlnLabTile_e4m3 = cute::Shape<cute::_128, cute::_128, cute::_128>;
using GlnLabEpi_e4m3_e64 = cute::Shape<cute::_128, cute::_64>;

GLN_LAB_WGRAD_EPI_E4M3(lab_e4m3_wgrad_coop_e64, GlnLabTile_e4m3, GlnLabEpi_e4m3_e64, 2, 2, true, false, 5, 67584)

/* The control of the E4M3 epilogue rows: with the builder's own choices (128×32 subtile, 4 C / 2 D
 * stages, D in its C slot) lab_epi.cuh assembles exactly the library's E4M3 wgrad kernel type, so
 * the lab's "large regime" row differs from each candidate only by the knobs it names. */
using GlnLabE4m3Wgrad = gln_cutlass::Grouped<cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t,
                                             cutlass::layout::ColumnMajor, float, GlnLabTile_e4m3,
                                             cute::Shape<cute::_1, cute::_1, cute::_1>,
                                             cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                             cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
static_assert(cute::is_same_v<gln_lab::WgradEpi<GlnLabTile_e4m3, cute::Shape<cute::_128, cute::_32>, 4, 2, true, false,
                                                false, cutlass::float_e4m3_t, cutlass::layout::RowMajor,
                                                cutlass::float_e4m3_t, cutlass::layout::ColumnMajor>::Kernel,
                              GlnLabE4m3Wgrad::Kernel>,
              "lab_epi.cuh with the builder's policy must give the library's E4M3 wgrad kernel");

/* Kernel-lab wgrad candidate (bench/lab/lab_epi.cuh): the small regime's cooperative 128×256 tile
 * and 128×32 subtile, D staged in its C slot as there, but 3 D stages instead of 2: two committed
 * 16 KB stores may stay in flight (the library's kernel waits for all but one before each next
 * subtile).  The same 66 KB of epilogue shared memory, so the mainloop keeps its 3 stages; the
 * price is that a C slot returns to the loader one store later (two of the four slots wait on
 * stores instead of one). */
#include "lab_epi.cuh"

using GlnLabTile_d3 = cute::Shape<cute::_128, cute::_256, cute::_64>;
using GlnLabEpi_d3 = cute::Shape<cute::_128, cute::_32>;

GLN_LAB_WGRAD_EPI(lab_bf16_nt_coop_128x256_d3, GlnLabTile_d3, GlnLabEpi_d3, 4, 3, true, false, 3, 67584)

/* The control for every lab_epi candidate: with the builder's own choices for this tile (2 D
 * stages instead of 3) lab_epi.cuh assembles exactly the library's small-regime kernel type
 * (grouped_bf16_nt_f32.cu), so the lab's "small regime" row is the baseline whose only
 * difference from each candidate is the knobs it names. */
using GlnLabSmallRegime = gln_cutlass::Grouped<cutlass::bfloat16_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                                               cutlass::layout::RowMajor, float, GlnLabTile_d3,
                                               cute::Shape<cute::_1, cute::_1, cute::_1>,
                                               cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                               cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
static_assert(cute::is_same_v<gln_lab::WgradEpi<GlnLabTile_d3, GlnLabEpi_d3, 4, 2, true, false>::Kernel,
                              GlnLabSmallRegime::Kernel>,
              "lab_epi.cuh with the builder's policy must give the small regime's kernel");

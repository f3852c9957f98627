/* Kernel-lab wgrad candidate (bench/lab/lab_epi.cuh): the ptr-array PINGPONG kernel with 128×128
 * tiles per consumer warpgroup, no cluster, so that one warpgroup's epilogue (main_grad read and
 * write) runs under the other's main loop instead of after it, as it does in the cooperative
 * 128×256 kernel of the small regime.  The pingpong 128×128 kernel with the builder's epilogue
 * (64×32 subtiles of 8 KB, 4 C stages: 32 KB of C in flight for one warpgroup) was this regime's
 * kernel before (0.643 ms on the Qwen3-like wgrad against 0.514 for the cooperative 128×256,
 * bench/RESULTS.md): its epilogue, which must now carry all the main_grad traffic alone, streams
 * at about 60 % of the cooperative one's rate.  Here the epilogue moves the cooperative kernel's
 * bytes per step instead: 64×64 subtiles (16 KB of FP32, as the cooperative 128×32), 4 C stages
 * (64 KB of C), 2 D stages, D staged in its C slot.  Epilogue 66 KB of shared memory (one set, used
 * by the two warpgroups' epilogues in turn), mainloop 5 stages of 32 KB. */
#include "lab_epi.cuh"

using GlnLabTile_pp128 = cute::Shape<cute::_128, cute::_128, cute::_64>;
using GlnLabEpi_pp128 = cute::Shape<cute::_64, cute::_64>;

GLN_LAB_WGRAD_EPI_SCHED(lab_bf16_nt_pp_128x128_e64, true, GlnLabTile_pp128, GlnLabEpi_pp128, 4, 2, true, false, 5,
                        67584)

/* The control of the pingpong rows: with the builder's choices for this tile and schedule (64×32
 * subtile, 4 C / 2 D stages, D in its C slot) lab_epi.cuh assembles exactly the pingpong 128×128
 * kernel the small regime had before (e43c3ab's grouped_bf16_nt_f32_small.cu), so the candidates
 * differ from that measured kernel only by the knobs they name. */
using GlnLabPingpong128 = gln_cutlass::Grouped<cutlass::bfloat16_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                                               cutlass::layout::RowMajor, float, GlnLabTile_pp128,
                                               cute::Shape<cute::_1, cute::_1, cute::_1>,
                                               cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                                               cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
static_assert(cute::is_same_v<gln_lab::WgradEpi<GlnLabTile_pp128, cute::Shape<cute::_64, cute::_32>, 4, 2, true, false,
                                                true>::Kernel,
                              GlnLabPingpong128::Kernel>,
              "lab_epi.cuh with the builder's pingpong policy must give the builder's pingpong 128x128 kernel");

/* The library's medium-regime bf16 wgrad (src/backend/cuda/cutlass/grouped_bf16_nt_f32_pp.cuh),
 * promoted from this candidate, is this very kernel type. */
#include "backend/cuda/cutlass/grouped_bf16_nt_f32_pp.cuh"
static_assert(cute::is_same_v<GlnLab_lab_bf16_nt_pp_128x128_e64::Kernel,
                              GlnWgradBf16Pingpong::Kernel>,
              "the library's pingpong wgrad must be the lab's pp 128x128 e64 C4D2 candidate");

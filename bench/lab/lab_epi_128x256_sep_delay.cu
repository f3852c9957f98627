/* Kernel-lab wgrad candidate (bench/lab/lab_epi.cuh): as lab_epi_128x256_sep.cu (cooperative
 * 128×256, 128×32 subtile, separate C and D buffers, 4 + 4 stages) with DelayTmaStore: each
 * subtile's TMA store is issued after the next subtile's C read and arithmetic, so the fence and
 * named-barrier sync in front of a store overlap with work.  CUTLASS's builder never picks this for
 * ptr-array kernels or for epilogues that read C (its comment: slower with residual loads); the
 * lab measures it instead of assuming.  Epilogue 130 KB, mainloop 2 stages. */
#include "lab_epi.cuh"

using GlnLabTile_dly = cute::Shape<cute::_128, cute::_256, cute::_64>;
using GlnLabEpi_dly = cute::Shape<cute::_128, cute::_32>;

GLN_LAB_WGRAD_EPI(lab_bf16_nt_coop_128x256_sep_delay, GlnLabTile_dly, GlnLabEpi_dly, 4, 4, false, true, 2, 133120)

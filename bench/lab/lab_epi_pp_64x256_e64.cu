/* Kernel-lab wgrad candidate (bench/lab/lab_epi.cuh): the ptr-array PINGPONG kernel with 64×256
 * tiles per consumer warpgroup, no cluster: the epilogue of lab_epi_pp_128x128_e64.cu (64×64
 * subtiles of 16 KB, 4 C stages, 2 D stages, D staged in its C slot) on a tile of the same area
 * whose rows are 1 KB of FP32 (as the cooperative 128×256's) and whose main loop issues one
 * 64×256 warpgroup MMA per 16-deep k step instead of two 64×128 ones (B is read from shared
 * memory once per step, not twice).  Epilogue 66 KB of shared memory, mainloop 4 stages of
 * 40 KB. */
#include "lab_epi.cuh"

using GlnLabTile_pp64 = cute::Shape<cute::_64, cute::_256, cute::_64>;
using GlnLabEpi_pp64 = cute::Shape<cute::_64, cute::_64>;

GLN_LAB_WGRAD_EPI_SCHED(lab_bf16_nt_pp_64x256_e64, true, GlnLabTile_pp64, GlnLabEpi_pp64, 4, 2, true, false, 4, 67584)

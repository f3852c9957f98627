/* Kernel-lab wgrad candidate (bench/lab/lab_epi.cuh): as lab_epi_pp_128x128_e64.cu (pingpong,
 * 128×128 per warpgroup, 64×64 subtiles of 16 KB, 2 D stages, D staged in its C slot) with 8 C
 * stages instead of 4: a whole tile's C (128 KB) may be in flight, so the C loads of the next tile
 * run while the current tile's epilogue finishes, and the epilogue, alone responsible for the
 * main_grad traffic in a pingpong kernel, has twice the reads in flight.  Its row against
 * lab_epi_pp_128x128_e64.cu says whether the pingpong epilogue is bound by the bytes it keeps in
 * flight.  Epilogue 130 KB of shared memory, mainloop 3 stages of 32 KB. */
#include "lab_epi.cuh"

using GlnLabTile_pp128c8 = cute::Shape<cute::_128, cute::_128, cute::_64>;
using GlnLabEpi_pp128c8 = cute::Shape<cute::_64, cute::_64>;

GLN_LAB_WGRAD_EPI_SCHED(lab_bf16_nt_pp_128x128_e64_c8, true, GlnLabTile_pp128c8, GlnLabEpi_pp128c8, 8, 2, true, false,
                        3, 133120)

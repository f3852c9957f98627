/* Kernel-lab wgrad candidate (bench/lab/lab_epi.cuh): a cooperative 256×128 tile (no cluster)
 * with the separate-buffer epilogue of lab_epi_128x256_sep.cu: 128×32 subtile, 4 C stages
 * released on read, 4 D stages, three committed stores in flight.  The same tile area and
 * main_grad bytes per tile as the small regime's 128×256, but each tile's rows are 512 bytes of
 * FP32 instead of 1 KB and its 8 subtiles are 2 down M by 4 across N instead of 1 by 8 (the two
 * consumer warpgroups take alternate 64-row blocks, so every 128-row subtile is split between
 * them as on 128×256).  Against the 256×128 on 1×2 clusters the lab timed before (0.543 ms,
 * builder epilogue).  Epilogue 130 KB, mainloop 2 stages. */
#include "lab_epi.cuh"

using GlnLabTile_256 = cute::Shape<cute::_256, cute::_128, cute::_64>;
using GlnLabEpi_256 = cute::Shape<cute::_128, cute::_32>;

GLN_LAB_WGRAD_EPI(lab_bf16_nt_coop_256x128_sep, GlnLabTile_256, GlnLabEpi_256, 4, 4, false, false, 2, 133120)

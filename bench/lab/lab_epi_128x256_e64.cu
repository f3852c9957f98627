/* Kernel-lab wgrad candidate (bench/lab/lab_epi.cuh): the small regime's cooperative 128×256 tile
 * with a 128×64 epilogue subtile (32 KB of FP32) instead of the builder's 128×32: half as many
 * subtile iterations per tile (4 instead of 8), so half the named-barrier syncs and store waits,
 * and each C load / D store moves twice the bytes.  Stages as the builder would pick them for
 * this subtile: 4 C stages, 2 D stages, D staged in its C slot (ReuseSmemC), one committed store
 * left in flight.  Epilogue 130 KB of shared memory, which leaves the mainloop 2 stages (K is one
 * or two 64-wide blocks per tile on the small-expert shapes this regime serves). */
#include "lab_epi.cuh"

using GlnLabTile_e64 = cute::Shape<cute::_128, cute::_256, cute::_64>;
using GlnLabEpi_e64 = cute::Shape<cute::_128, cute::_64>;

GLN_LAB_WGRAD_EPI(lab_bf16_nt_coop_128x256_e64, GlnLabTile_e64, GlnLabEpi_e64, 4, 2, true, false, 2, 133120)

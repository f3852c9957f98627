/* Kernel-lab wgrad candidate (bench/lab/lab_epi.cuh): the small regime's cooperative 128×256 tile
 * and 128×32 subtile with separate C and D buffers (no ReuseSmemC): 4 C stages, released to the
 * loader as soon as their subtile is read into registers, so the C loads of the next subtiles (and
 * of the next tile) no longer wait for D stores to complete; 4 D stages, three committed 16 KB
 * stores in flight.  Epilogue 130 KB of shared memory, mainloop 2 stages. */
#include "lab_epi.cuh"

using GlnLabTile_sep = cute::Shape<cute::_128, cute::_256, cute::_64>;
using GlnLabEpi_sep = cute::Shape<cute::_128, cute::_32>;

GLN_LAB_WGRAD_EPI(lab_bf16_nt_coop_128x256_sep, GlnLabTile_sep, GlnLabEpi_sep, 4, 4, false, false, 2, 133120)

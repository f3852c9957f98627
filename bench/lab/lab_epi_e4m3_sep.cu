/* Kernel-lab candidate for the E4M3 wgrad into the FP32 main_grad of large experts (see
 * lab_epi_e4m3_e64.cu): the library's 128×32 subtiles with separate C and D buffers (no
 * ReuseSmemC): 4 C stages (the whole 64 KB FP32 C tile) released to the loader as soon as they
 * are read into registers, so the next tile's C loads start under this tile's stores and the
 * next main loop; 2 D stages.  Epilogue 98 KB of shared memory, mainloop 4 stages.  Measured
 * (H200, 2026-12-04, runs at ee03b23, ms): 4.661 against the control's 4.282 — not promoted. */
#include "lab_epi.cuh"

using GlnLabTile_e4m3_sep = cute::Shape<cute::_128, cute::_128, cute::_128>;
using GlnLabEpi_e4m3_sep = cute::Shape<cute::_128, cute::_32>;

GLN_LAB_WGRAD_EPI_E4M3(lab_e4m3_wgrad_coop_sep, GlnLabTile_e4m3_sep, GlnLabEpi_e4m3_sep, 4, 2, false, false, 4, 100352)

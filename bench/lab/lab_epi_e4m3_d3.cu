/* Kernel-lab candidate for the E4M3 wgrad into the FP32 main_grad of large experts (see
 * lab_epi_e4m3_e64.cu): the library's 128×32 subtiles and 4 C stages, D in its C slot, but 3 D
 * stages: two committed 16 KB stores may stay in flight (the library's kernel waits for all but
 * one before each next subtile).  The same 66 KB of epilogue shared memory, mainloop 5 stages.
 * Measured (H200, 2026-12-04, runs at ee03b23, ms): 4.308 against the control's 4.282 — not promoted. */
#include "lab_epi.cuh"

using GlnLabTile_e4m3_d3 = cute::Shape<cute::_128, cute::_128, cute::_128>;
using GlnLabEpi_e4m3_d3 = cute::Shape<cute::_128, cute::_32>;

GLN_LAB_WGRAD_EPI_E4M3(lab_e4m3_wgrad_coop_d3, GlnLabTile_e4m3_d3, GlnLabEpi_e4m3_d3, 4, 3, true, false, 5, 67584)

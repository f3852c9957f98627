/* Internal to the CUDA backend, for the tests: which kernel a dispatch launched.  Each of the
 * FP8 block-scaling quantizer (cuda_block.cu) and the grouped dequantization
 * (cuda_grouped_dequant.cu) keeps a fast kernel and a general one for what the fast one cannot
 * take; a test that forces the general one through its inputs (dtype, alignment, shape) proves
 * it through these probes. */
#ifndef GLN_BACKEND_CUDA_BLOCK_H
#define GLN_BACKEND_CUDA_BLOCK_H

/* The name of the kernel the last block-scaling quantize launched ("gln_block_quant_tma_kernel",
 * "gln_block_quant_kernel" or "gln_block_quant_act_kernel"), NULL when none launched since the
 * previous call of this function (which clears it).  Process-wide. */
const char *gln_cuda_block_quant_last_kernel(void);

/* The same for the grouped / list dequantization to bf16: "gln_dequant_rows_kernel<16>",
 * "gln_dequant_rows_kernel<8>", "gln_dequant_rows_kernel<1>" (units of 16 / 8 codes, or one
 * element at a time) or "gln_dequant_transposed_kernel". */
const char *gln_cuda_dequant_last_kernel(void);

#endif

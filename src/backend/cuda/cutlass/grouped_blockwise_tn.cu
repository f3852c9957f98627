/* Grouped FP8 block scaling (the DeepSeek recipe), E4M3 × E4M3, both operands K-major, bf16
 * output: fprop (x · Wᵀ, + bias_i in the epilogue) and dgrad (dy · W through W's transposed
 * copy); 1×128 scales on the token rows × 128×128 scales on the weights, applied to the FP32
 * partial sum of every 128-wide K block (cuda_grouped_blockwise.h).  128×128×128 tiles, the
 * cooperative schedule: the tile CUTLASS's blockwise mainloop is built around (one 128-block of K
 * per k-tile, one weight scale per tile along N). */
#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"

GLN_CUTLASS_BLOCKWISE(blockwise_tn, cutlass::bfloat16_t, 128, cute::Shape<cute::_128, cute::_128, cute::_128>,
                      cute::Shape<cute::_1, cute::_1, cute::_1>, true)

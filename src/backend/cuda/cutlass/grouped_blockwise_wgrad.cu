/* Grouped FP8 block-scaled wgrad, E4M3 × E4M3: dW_i [M, N] (+)= dy_iᵀ · x_i from the two
 * transposed (columnwise) copies, both K-major along the expert's tokens, each with one scale per
 * row per 128 tokens (granularity 1 along M and N), FP32 output into main_grad (beta = 1 when
 * accumulating).  Experts whose row count is not a multiple of 16 cannot be read through TMA
 * (a 16-byte stride): cuda_grouped_blockwise_scales.cu does those. */
#include "backend/cuda/cutlass/grouped_blockwise_sm90.cuh"

GLN_CUTLASS_BLOCKWISE(blockwise_wgrad, float, 1, cute::Shape<cute::_128, cute::_128, cute::_128>,
                      cute::Shape<cute::_1, cute::_1, cute::_1>, false)

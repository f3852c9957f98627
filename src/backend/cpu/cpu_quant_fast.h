/* Fast CPU quantizers (cpu_quant_fast.c) and the GEMMs' exact dequantization (cpu_dequant.c):
 * bitwise identical to the host references of src/quant, which stay the definition. */
#ifndef GLN_BACKEND_CPU_QUANT_FAST_H
#define GLN_BACKEND_CPU_QUANT_FAST_H

#include "grouplin.h"

/* Same contract and output as gln_quantize_ref (per-tensor and MXFP8 take the fast loops;
 * block scaling runs the reference). */
gln_status_t gln_cpu_quantize_fast(const gln_quant_config_t *cfg, const gln_tensor_t *in, gln_tensor_t *out);
/* Same output as gln_dequantize_to_f32_ref: one copy of `in` as FP32, logical [rows, cols]. */
gln_status_t gln_cpu_dequantize_to_f32(const gln_tensor_t *in, int columnwise, float *out);

#endif

/* The SwiGLU / GELU math on the device: one definition for every kernel that computes an
 * activation (include after numerics/numerics.h and grouplin.h).
 *
 * Used by the MoE activation kernels (cuda_moe.cu) and by the quantizers' activation-on-load
 * option (cuda_quant_tile.cuh, cuda_block.cu: gln_activation_forward_quantize).  The fused
 * quantize must produce exactly the bits the activation kernel writes, so every product, sum and
 * quotient is written as an IEEE-rounded intrinsic (__fmul_rn, __fadd_rn, __fdiv_rn): nvcc never
 * contracts those into an FMA, whatever the surrounding code, so the value cannot depend on the
 * kernel this is inlined into.  expf and tanhf are the CUDA math library's (no fast-math flag is
 * used); their results are consumed only by the non-contractible intrinsics.
 *
 * The operation order is the CPU reference's (src/backend/cpu/cpu_moe.c, plain C evaluated left
 * to right, one rounding per operation), so the device differs from the host only where the
 * device expf / tanhf differ from the host's by their few ulp. */
#ifndef GLN_BACKEND_CUDA_ACT_CUH
#define GLN_BACKEND_CUDA_ACT_CUH

#ifndef __CUDACC__
#error "cuda_act.cuh is for CUDA sources only"
#endif

#define GLN_GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GLN_GELU_A 0.044715f

/* 1 / (1 + e^-a) */
__device__ __forceinline__ float gln_act_sigmoid(float a) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-a))); }

/* tanh(C·(x + A·x·x·x)), the shared part of GELU forward and backward */
__device__ __forceinline__ float gln_act_gelu_tanh(float x) {
    const float cube = __fmul_rn(__fmul_rn(__fmul_rn(GLN_GELU_A, x), x), x);
    return tanhf(__fmul_rn(GLN_GELU_C, __fadd_rn(x, cube)));
}

/* GELU (tanh form): 0.5·x·(1 + t) */
__device__ __forceinline__ float gln_act_gelu(float x) {
    return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, gln_act_gelu_tanh(x)));
}

/* d gelu / dx = 0.5·(1 + t) + 0.5·x·(1 - t·t)·C·(1 + 3·A·x·x) */
__device__ __forceinline__ float gln_act_gelu_grad(float x) {
    const float t = gln_act_gelu_tanh(x);
    const float left = __fmul_rn(0.5f, __fadd_rn(1.0f, t));
    const float poly = __fadd_rn(1.0f, __fmul_rn(__fmul_rn(__fmul_rn(3.0f, GLN_GELU_A), x), x));
    const float right = __fmul_rn(__fmul_rn(__fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, -__fmul_rn(t, t))), GLN_GELU_C), poly);
    return __fadd_rn(left, right);
}

/* The forward value of one element: a is the gate half's element (GELU's only input), b the up
 * half's (SwiGLU: silu(a)·b = (a·s)·b). */
__device__ __forceinline__ float gln_act_fwd(int act, float a, float b) {
    if (act == GLN_ACT_GELU) return gln_act_gelu(a);
    return __fmul_rn(__fmul_rn(a, gln_act_sigmoid(a)), b);
}

/* d(out)/da · d and (SwiGLU) d(out)/db · d:
 *   GELU    da = d · gelu'(a)
 *   SwiGLU  da = (d·b)·(s + (a·s)·(1 - s)),  db = (d·a)·s */
__device__ __forceinline__ void gln_act_bwd(int act, float a, float b, float d, float *da, float *db) {
    if (act == GLN_ACT_GELU) {
        *da = __fmul_rn(d, gln_act_gelu_grad(a));
        *db = 0.0f;
        return;
    }
    const float s = gln_act_sigmoid(a);
    const float ds = __fadd_rn(s, __fmul_rn(__fmul_rn(a, s), __fadd_rn(1.0f, -s)));
    *da = __fmul_rn(__fmul_rn(d, b), ds);
    *db = __fmul_rn(__fmul_rn(d, a), s);
}

/* ---- activation on load (the quantizers' fused input) --------------------------------------- */

/* The act field of a quantizer's arguments: 0 = the input is read as it is; else the input is
 * the activation's [rows, 2H] (SwiGLU) or [rows, H] (GELU) bf16 input and the quantizer sees the
 * activation's bf16 output (gln_act_load_kind(act) = act + 1). */
#define GLN_ACT_LOAD_NONE 0
__host__ __device__ static inline int gln_act_load_kind(int act) { return act + 1; }

/* The bf16 outputs of columns c .. c+7 of row `row`, packed two per word (column c + 2k in the
 * low half of word k, as a bf16 buffer holds them), exactly as the activation kernel stores
 * them: gln_act_fwd in FP32, then gln_f32_to_bf16_bits.  `in` is the bf16 activation input with
 * rows ld elements apart; SwiGLU's up half starts h columns after the gate half.  kind is
 * gln_act_load_kind(act).  Needs a 16-byte aligned `in` and c, h, ld multiples of 8 (two 16-byte
 * loads); the caller guarantees it. */
__device__ __forceinline__ void gln_act_load_bf16x8(int kind, const void *in, int64_t ld, int64_t h, int64_t row,
                                                    int64_t c, uint32_t out[4]) {
    const int act = kind - 1;
    const uint16_t *p = (const uint16_t *)in + (size_t)row * (size_t)ld + (size_t)c;
    const uint4 ua = __ldg((const uint4 *)p);
    const uint4 ub = act == GLN_ACT_SWIGLU ? __ldg((const uint4 *)(p + h)) : make_uint4(0u, 0u, 0u, 0u);
    const uint32_t wa[4] = {ua.x, ua.y, ua.z, ua.w}, wb[4] = {ub.x, ub.y, ub.z, ub.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float lo = gln_act_fwd(act, gln_bf16_bits_to_f32((uint16_t)(wa[k] & 0xFFFFu)),
                                     gln_bf16_bits_to_f32((uint16_t)(wb[k] & 0xFFFFu)));
        const float hi = gln_act_fwd(act, gln_bf16_bits_to_f32((uint16_t)(wa[k] >> 16)),
                                     gln_bf16_bits_to_f32((uint16_t)(wb[k] >> 16)));
        out[k] = (uint32_t)gln_f32_to_bf16_bits(lo) | (uint32_t)gln_f32_to_bf16_bits(hi) << 16;
    }
}

#endif

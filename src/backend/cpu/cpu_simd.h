/* GLN_CPU_HOT: marks the element-wise loops of the CPU backend (conversions, FP8 encode / decode,
 * dequantization) to be compiled twice, for AVX2 and for the baseline x86-64 (SSE2), with the
 * variant chosen once at load time from the CPU (GCC target_clones, an ifunc).  The default
 * build targets SSE2, whose 4-wide vectors halve the throughput of these loops on every machine
 * we run on.
 *
 * Bitwise identical by construction: the loops use only IEEE operations that SSE2 and AVX2
 * round the same way (conversions, multiplies, adds, integer bit operations; no FMA is enabled,
 * and -std=c11 keeps -ffp-contract=off), with no reduction whose order the vector width could
 * change except integer / exact maxima. */
#ifndef GLN_BACKEND_CPU_SIMD_H
#define GLN_BACKEND_CPU_SIMD_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(GLN_CPU_NO_CLONES)
#define GLN_CPU_HOT __attribute__((target_clones("avx2", "default")))
#else
#define GLN_CPU_HOT
#endif

#endif

/* The standalone labs' CUDA error check (lab_stream.cu, lab_mx.cu): print the failing call with its
 * place and the runtime's message, then exit 1.  Lab programs only; the library reports errors
 * through gln_status_t instead. */
#ifndef GLN_BENCH_LAB_LAB_CHECK_H
#define GLN_BENCH_LAB_LAB_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif

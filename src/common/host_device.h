/* GLN_HD marks a function that runs on the host and on the device: __host__ __device__ when
 * compiled by nvcc, nothing in C.  Headers that share one definition between the CPU code and
 * the CUDA kernels (numerics/numerics.h, tensor/scale_layout.h) declare their functions
 * `GLN_HD static inline`. */
#ifndef GLN_COMMON_HOST_DEVICE_H
#define GLN_COMMON_HOST_DEVICE_H

#ifdef __CUDACC__
#define GLN_HD __host__ __device__
#else
#define GLN_HD
#endif

#endif

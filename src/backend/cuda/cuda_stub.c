/* Built when the CUDA backend is not compiled in: the backend reports itself unavailable. */
#include "backend/backend.h"

const gln_backend_ops_t *gln_backend_cuda_ops(void) { return NULL; }

int gln_cuda_device_present(void) { return 0; }

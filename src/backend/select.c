/* Backend selection: the table that serves each backend kind, whether that backend can run on
 * this machine, and its name.  The one place that knows which backends exist. */
#include "backend/backend.h"

const gln_backend_ops_t *gln_backend_ops_for(gln_backend_kind_t kind) {
    switch (kind) {
    case GLN_BACKEND_CPU: return gln_backend_cpu_ops();
    case GLN_BACKEND_CUDA: return gln_backend_cuda_ops();
    }
    return NULL;
}

int gln_backend_available(gln_backend_kind_t backend) {
    switch (backend) {
    case GLN_BACKEND_CPU: return 1;
    case GLN_BACKEND_CUDA: return gln_backend_cuda_ops() != NULL && gln_cuda_device_present();
    }
    return 0;
}

const char *gln_backend_name(gln_backend_kind_t backend) {
    switch (backend) {
    case GLN_BACKEND_CPU: return "cpu";
    case GLN_BACKEND_CUDA: return "cuda";
    }
    return "invalid";
}

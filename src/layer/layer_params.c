/* Parameters and gradient buffers of the layer.
 *
 * Parameters are either the caller's (per-expert pointers or one packed [N, K_out, K_in] /
 * [N, K_out] buffer; never freed by the layer) or owned: one packed buffer, weights drawn
 * N(0, init_std²) independently per expert from `seed`, biases zero.  Gradient buffers:
 *   fused wgrad (plain weights) : FP32 main_grad — the caller's, or owned (zeroed at create);
 *   not fused (plain weights)   : owned wgrad buffers in the param dtype (like autograd .grad),
 *                                 only when weights_require_grad;
 *   distributed weights         : none (the group owns main_grad);
 *   bias                        : owned bias-gradient buffers in the param dtype. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "layer/layer.h"

static const char *FN = "gln_grouped_linear_create";

static void **ptr_list(int32_t n) { return calloc((size_t)n, sizeof(void *)); }

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0; }

/* Store a float into element i of a host array of a high-precision dtype. */
static void store_hp(void *dst, gln_dtype_t dtype, size_t i, float v) {
    switch (dtype) {
    case GLN_DTYPE_BF16: ((uint16_t *)dst)[i] = gln_fp32_to_bf16(v); break;
    case GLN_DTYPE_FP16: ((uint16_t *)dst)[i] = gln_fp32_to_fp16(v); break;
    default: ((float *)dst)[i] = v; break;
    }
}

/* Expert i's weights: Box–Muller normals from a stream seeded by (seed, i). */
static gln_status_t init_weights(gln_grouped_linear_t *L, char *packed, size_t wbytes) {
    size_t count = (size_t)L->kout * (size_t)L->kin;
    void *host = malloc(wbytes);
    if (!host) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN);
    gln_status_t st = GLN_STATUS_SUCCESS;
    for (int32_t e = 0; e < L->n && st == GLN_STATUS_SUCCESS; e++) {
        uint64_t s = L->cfg.seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(e + 1));
        for (size_t k = 0; k < count; k += 2) {
            double r = sqrt(-2.0 * log(uniform01(&s))), t = 6.283185307179586 * uniform01(&s);
            store_hp(host, L->cfg.param_dtype, k, (float)(L->cfg.init_std * r * cos(t)));
            if (k + 1 < count) store_hp(host, L->cfg.param_dtype, k + 1, (float)(L->cfg.init_std * r * sin(t)));
        }
        st = gln_op_memcpy(L->ctx, packed + wbytes * (size_t)e, host, wbytes,
                           GLN_COPY_HOST_TO_BACKEND);
    }
    free(host);
    return st;
}

/* An owned zeroed packed buffer of n members of `each` bytes, viewed as a pointer list. */
static gln_status_t owned_list(gln_context_t *ctx, int32_t n, size_t each, void **mem, void ***list) {
    GLN_TRY(gln_ctx_alloc(ctx, each * (size_t)n, mem));
    GLN_TRY(gln_ctx_zero(ctx, *mem, each * (size_t)n));
    for (int32_t i = 0; i < n; i++) (*list)[i] = (char *)*mem + each * (size_t)i;
    return GLN_STATUS_SUCCESS;
}

/* Caller list, caller packed buffer, or NULL (owned). */
static int caller_list(void *const *list, void *packed, int32_t n, size_t each, void **out) {
    if (!list && !packed) return 0;
    for (int32_t i = 0; i < n; i++) out[i] = list ? list[i] : (char *)packed + each * (size_t)i;
    return 1;
}

/* Bytes of one expert's slice of `elems` elements of `es` bytes, checked together with the N
 * slices of the packed buffer (the config bounds N·K_out·K_in by GLN_MAX_ELEMS, so for a
 * validated layer these never fail; they make a wrapped size impossible all the same). */
static gln_status_t slice_bytes(const gln_grouped_linear_t *L, const char *what, int64_t elems,
                                size_t es, size_t *each) {
    int64_t total;
    size_t all;
    GLN_REQUIRE_ARG(!gln_mul_overflow_i64(elems, L->n, &total), "%s: %d experts of %lld %s elements "
                    "overflow int64", FN, (int)L->n, (long long)elems, what);
    GLN_TRY(gln_bytes(FN, what, total, es, &all));
    return gln_bytes(FN, what, elems, es, each);
}

gln_status_t gln_layer_params_init(gln_grouped_linear_t *L) {
    const gln_grouped_linear_params_t *p = &L->cfg.params;
    gln_context_t *ctx = L->ctx;
    int32_t n = L->n;
    size_t es = gln_dtype_size(L->cfg.param_dtype), wbytes, bbytes, mgbytes;
    GLN_TRY(slice_bytes(L, "weight", L->kout * L->kin, es, &wbytes));
    GLN_TRY(slice_bytes(L, "main_grad", L->kout * L->kin, sizeof(float), &mgbytes));
    GLN_TRY(slice_bytes(L, "bias", L->kout, es, &bbytes));
    L->weights = ptr_list(n);
    L->biases = ptr_list(n);
    L->main_grads = (float **)ptr_list(n);
    L->wgrads = ptr_list(n);
    L->bgrads = ptr_list(n);
    if (!L->weights || !L->biases || !L->main_grads || !L->wgrads || !L->bgrads)
        return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN);
    if (!L->dist && !caller_list(p->weights, p->weight_packed, n, wbytes, L->weights)) {
        GLN_TRY(owned_list(ctx, n, wbytes, &L->owned_weights, &L->weights));
        GLN_TRY(init_weights(L, L->owned_weights, wbytes));
    }
    if (L->cfg.bias) {
        if (!caller_list(p->biases, p->bias_packed, n, bbytes, L->biases))
            GLN_TRY(owned_list(ctx, n, bbytes, &L->owned_biases, &L->biases));
        GLN_TRY(owned_list(ctx, n, bbytes, &L->owned_bgrad, &L->bgrads));
    }
    if (L->dist) return GLN_STATUS_SUCCESS;
    if (L->cfg.fuse_wgrad_accumulation) {
        if (!caller_list((void *const *)p->main_grads, p->main_grad_packed, n, mgbytes,
                         (void **)L->main_grads))
            GLN_TRY(owned_list(ctx, n, mgbytes, &L->owned_main_grad, (void ***)&L->main_grads));
    } else if (L->cfg.weights_require_grad) {
        GLN_TRY(owned_list(ctx, n, wbytes, &L->owned_wgrad, &L->wgrads));
    }
    return GLN_STATUS_SUCCESS;
}

void gln_layer_params_free(gln_grouped_linear_t *L) {
    gln_ctx_free(L->ctx, L->owned_weights);
    gln_ctx_free(L->ctx, L->owned_biases);
    gln_ctx_free(L->ctx, L->owned_main_grad);
    gln_ctx_free(L->ctx, L->owned_wgrad);
    gln_ctx_free(L->ctx, L->owned_bgrad);
    free(L->weights);
    free(L->biases);
    free(L->main_grads);
    free(L->wgrads);
    free(L->bgrads);
}

/* ------------------------------------------------------------------ public accessors */

static gln_status_t check_expert(const char *fn, const gln_grouped_linear_t *L, int32_t expert) {
    GLN_REQUIRE_NOT_NULL(fn, L);
    GLN_REQUIRE_ARG(expert >= 0 && expert < L->n, "%s: expert %d must be in 0..%d", fn, (int)expert,
                    (int)L->n - 1);
    return GLN_STATUS_SUCCESS;
}

/* Distributed layers have no plain weight (NULL); the bias is NULL without bias. */
gln_status_t gln_grouped_linear_weight(gln_grouped_linear_t *layer, int32_t expert, void **weight,
                                       void **bias) {
    GLN_TRY(check_expert("gln_grouped_linear_weight", layer, expert));
    if (weight) *weight = layer->weights[expert];
    if (bias) *bias = layer->cfg.bias ? layer->biases[expert] : NULL;
    return GLN_STATUS_SUCCESS;
}

/* wgrad: the FP32 main_grad with fused accumulation, else the param-dtype gradient buffer
 * (NULL when weights do not require grad, or for distributed weights). */
gln_status_t gln_grouped_linear_grads(gln_grouped_linear_t *layer, int32_t expert, void **wgrad,
                                      void **bgrad) {
    GLN_TRY(check_expert("gln_grouped_linear_grads", layer, expert));
    if (wgrad)
        *wgrad = layer->cfg.fuse_wgrad_accumulation && !layer->dist ? (void *)layer->main_grads[expert]
                                                                     : layer->wgrads[expert];
    if (bgrad) *bgrad = layer->bgrads[expert];
    return GLN_STATUS_SUCCESS;
}

/* Zeroes the layer's gradient buffers: wgrad buffers, bias gradients, and a layer-owned
 * main_grad.  Caller-supplied main_grad buffers belong to the caller and are never touched
 * (microbatch FIRST overwrites them). */
gln_status_t gln_grouped_linear_zero_grad(gln_grouped_linear_t *layer) {
    GLN_REQUIRE_NOT_NULL("gln_grouped_linear_zero_grad", layer);
    gln_context_t *ctx = layer->ctx;
    /* sizes checked at create (slice_bytes): N·K_out·K_in elements fit */
    size_t es = gln_dtype_size(layer->cfg.param_dtype), wcount = (size_t)layer->kout * (size_t)layer->kin;
    size_t n = (size_t)layer->n;
    if (layer->owned_wgrad) GLN_TRY(gln_ctx_zero(ctx, layer->owned_wgrad, n * wcount * es));
    if (layer->owned_bgrad) GLN_TRY(gln_ctx_zero(ctx, layer->owned_bgrad, n * (size_t)layer->kout * es));
    if (layer->owned_main_grad)
        GLN_TRY(gln_ctx_zero(ctx, layer->owned_main_grad, n * wcount * sizeof(float)));
    return GLN_STATUS_SUCCESS;
}

/* The sharded weight group: grouplin's built-in implementer of gln_dist_weights_t.
 *
 * The N expert weights [K_out, K_in] are one flat buffer of total = N·K_out·K_in elements,
 * padded to R·shard_len (shard_len = ceil(total / R)); rank r owns the contiguous slice
 * [r·shard_len, (r+1)·shard_len).  Per rank: an FP32 master shard, a working copy in the
 * working dtype (what is gathered for the GEMMs) and an FP32 main_grad shard.  Padding elements
 * are zero everywhere and stay zero: every collective moves whole padded shards, and nothing
 * writes the padding of the full-size gradient buffer.
 *
 * Files, each depending only on those listed before it: sharded_layout.c (which all-gather, the
 * buffers' sizes and offsets), sharded_agree.c (failing together, the prefetch guard),
 * sharded_fp8.c (the FP8 shard: quantization, the quantized shard's refresh and columnwise
 * copies), sharded_protocol.c (the hooks the layer calls), sharded.c (create / destroy /
 * cross-rank consistency), sharded_data.c (load, shard access, sync, gathers), sharded_step.c
 * (the optimizer step on the shard, gln_sharded_weights_optimizer_step).
 *
 * quantized_shard: the FP8 shard (+ its scales) is kept across materializations and refreshed
 * only by load_full / sync_working / requantize / optimizer_step; every materialization gathers
 * it.  Per-tensor and 128x128: a backward one adds the columnwise copies by transposing the
 * gathered bytes and tile grids.  MXFP8: the group stores a second, columnwise FP8 shard (32x1
 * blocks; experts padded to 32-row multiples, shards of whole 32-row groups) refreshed with the
 * rowwise one, and a backward materialization gathers that one alone.
 *
 * Memory lives in the context's backend, and the communicator is bound to that same context
 * (a CPU context: self or MPI over host memory; a CUDA context: NCCL, or self).  Everything the
 * hooks do is stream-ordered on the context's stream: gathers, the FP32 reduce-scatter, the
 * main_grad accumulation (the backend's add_f32 slot) and the FP8 quantization of the shard.
 *
 * Buffers are reused, not allocated per call: gathered buffers go back to a small free list on
 * release (the live / peak counters count only materializations not yet released), the
 * full-size gradient buffer and the reduce-scatter scratch live as long as the group. */
#ifndef GLN_WEIGHTS_SHARDED_H
#define GLN_WEIGHTS_SHARDED_H

#include "comm/comm.h"
#include "grouplin.h"

/* One live materialization: the gathered buffer the layer has not released yet. */
typedef struct gln_sharded_live {
    void *base;
    size_t bytes;
} gln_sharded_live_t;

struct gln_sharded_weights {
    gln_context_t *ctx; /* not owned */
    gln_comm_t *comm;   /* not owned */
    gln_sharded_weights_config_t cfg;
    int64_t expert_elems;  /* K_out·K_in */
    int64_t expert_stride; /* elements from one expert to the next in the flat buffer: K_out·K_in,
                              or pad128(K_out)·K_in for the 128x128 FP8 all-gather (whole
                              128-row tiles per expert), pad32(K_out)·K_in for the MXFP8
                              quantized shard (whole 32-row groups); the padding rows are zero */
    int64_t total;         /* N·expert_stride */
    int64_t shard_len;
    int64_t shard_offset;
    int ranks;

    float *master;    /* [shard_len] FP32 */
    void *working;    /* [shard_len] working dtype */
    float *main_grad; /* [shard_len] FP32 */
    float *grad_full; /* [ranks·shard_len] FP32, allocated by the first grad_buffer/finalize */
    float *rs_buf;    /* [shard_len] reduce-scatter result when accumulating */

    /* released gather buffers, reused by the next materialize / prefetch of the same size */
    gln_sharded_live_t *pool;
    int pool_count, pool_cap;

    /* prefetch(direction): a gather started early, consumed by the next materialize of that
     * direction (0 forward, 1 backward); base is also on the live list */
    struct {
        void *base;
        size_t bytes;
        void *request[2]; /* the data gather, and the MXFP8 scales' gather */
    } prefetched[2];

    /* FP8 all-gather (cfg.fp8_gather): this rank's quantized shard [shard_len]; per-tensor: the
     * per-expert work arrays [4·N] FP32 (global amax, encode scale, and two sinks the
     * delayed-mode quantize writes but nobody reads); MXFP8: the shard's E8M0 scale grid, the
     * shard quantized as [shard_len/128, 128] (its first shard_len/32 bytes are the block scales
     * in flat order) */
    uint8_t *fp8_shard;
    float *fp8_work;      /* quantized_shard per-tensor: one more [N] block, the stored decode
                             scales of the quantized shard (fp8_work + 4·N) */
    uint8_t *fp8_sscale;  /* MXFP8 codes, or the 128x128 shard's FP32 tile-scale grid */
    size_t sscale_bytes;  /* its size */
    /* MXFP8 quantized shard: the shard is quantized as [shard_len / K_in, K_in] (whole 32-row
     * groups of one expert each), rowwise into fp8_shard / fp8_sscale and columnwise into these:
     * the columnwise FP8 shard [shard_len] (32x1 blocks, not transposed) and its E8M0 grid
     * [pad4(shard_len / K_in / 32), K_in] (its first shard_len / 32 bytes are the codes of the
     * shard's 32-row groups in order) */
    uint8_t *fp8_col;
    uint8_t *fp8_col_sscale;

    /* finalize in flight (async_finalize) */
    int pending;
    int pending_accumulate;
    void *request;

    gln_sharded_live_t *live;
    int live_count, live_cap;
    size_t live_bytes, peak_bytes;

    gln_dist_weights_t protocol;

    /* Fail-together bookkeeping (docs/distributed.md): agreements run so far, and for the
     * layer call in progress its name, the count at its start and how many it plans. */
    uint64_t agreements;
    uint64_t call_start;
    int call_planned;
    const char *call_fn;
};

/* Bytes of one working-dtype materialization (all ranks' padded shards). */
size_t gln_sharded_full_bytes(const gln_sharded_weights_t *sw);
/* Bytes of one FP8 materialization: the FP8 bytes of every padded shard, then (16-byte aligned,
 * at gln_sharded_fp8_scales_offset) the decode scales: per-tensor, N FP32; MXFP8, N scale grids
 * of gln_sharded_mx_grid_bytes each in the layout of gln_quant_layout, followed by the gathered
 * compact block scales (ranks·shard_len/32 bytes) they are built from; 128x128, every rank's
 * tile-scale grid back to back (expert e's grid starts at tile row e·pad128(K_out)/128). */
size_t gln_sharded_fp8_bytes(const gln_sharded_weights_t *sw);
size_t gln_sharded_fp8_scales_offset(const gln_sharded_weights_t *sw);
size_t gln_sharded_mx_grid_bytes(const gln_sharded_weights_t *sw);
/* Bytes of one backward materialization with quantized_shard: the forward's FP8 buffer, then
 * (16-byte aligned, at gln_sharded_col_offset) the columnwise FP8 copies, N [K_in, K_out] back
 * to back, and for 128x128 (16-byte aligned, at gln_sharded_col_scales_offset) their N
 * transposed tile grids of gln_sharded_col_grid_elems floats each.  Per-tensor columnwise copies
 * share the rowwise decode scales.  MXFP8 (no rowwise copy: the dgrad reads only the columnwise
 * one): the columnwise FP8 bytes of every padded shard (expert e at e·expert_stride), then (at
 * gln_sharded_fp8_scales_offset) N columnwise grids of gln_sharded_mx_col_grid_bytes each in
 * the layout of gln_quant_layout, followed by the gathered compact codes (ranks·shard_len/32
 * bytes, one row of K_in per 32-row group) they are built from. */
size_t gln_sharded_qshard_backward_bytes(const gln_sharded_weights_t *sw);
size_t gln_sharded_col_offset(const gln_sharded_weights_t *sw);
size_t gln_sharded_col_scales_offset(const gln_sharded_weights_t *sw);
/* ceil(K_in/128) · pad4(ceil(K_out/128)): one columnwise 128x128 grid */
int64_t gln_sharded_col_grid_elems(const gln_sharded_weights_t *sw);
/* pad4(ceil(K_out/32)) · K_in: one columnwise MXFP8 grid (K_in is a multiple of 128) */
size_t gln_sharded_mx_col_grid_bytes(const gln_sharded_weights_t *sw);
/* 1 when the FP8 all-gather is MXFP8 / 128x128 blocks (else per-tensor, or none) */
int gln_sharded_fp8_mx(const gln_sharded_weights_t *sw);
/* 1 for MXFP8 with quantized_shard (the 32-row layout and the columnwise FP8 shard) */
int gln_sharded_mx_qshard(const gln_sharded_weights_t *sw);
int gln_sharded_fp8_2d(const gln_sharded_weights_t *sw);
/* The row width of the shard's view when it is quantized in blocks: K_in for 128x128 tiles and
 * the MXFP8 quantized shard (whole 128- / 32-row groups), 128 for MXFP8 alone (whole 1x32
 * blocks); 0 for per-tensor scaling or no FP8 all-gather. */
int64_t gln_sharded_block_cols(const gln_sharded_weights_t *sw);
/* Expert e's real elements (its K_out·K_in, not the padding up to expert_stride) that fall in
 * this rank's shard: flat [*lo, *hi) (empty when lo >= hi). */
void gln_sharded_expert_segment(const gln_sharded_weights_t *sw, int32_t e, int64_t *lo, int64_t *hi);
/* Columns of a 128x128 scale grid of K_in columns: pad4(ceil(K_in / 128)) */
int64_t gln_sharded_2d_grid_cols(const gln_sharded_weights_t *sw);
/* Complete every prefetched gather and free the group's buffers (destroy). */
void gln_sharded_free_gathers(gln_sharded_weights_t *sw);
/* INVALID_STATE naming `fn` while a prefetched gather still reads the working shard. */
gln_status_t gln_sharded_require_no_prefetch(const char *fn, const gln_sharded_weights_t *sw);
/* sharded_fp8.c: the FP8 shard.  Quantize the working shard into sw->fp8_shard: per-tensor with
 * global per-expert scales (decode scales to scale_inv; local_amax as gln_sharded_requantize's,
 * or NULL), or in blocks (gln_sharded_block_cols != 0): MXFP8 (codes to fp8_sscale; with
 * quantized_shard also the columnwise copy into fp8_col / fp8_col_sscale, in the same pass) or
 * 128x128 tiles (tile grid to fp8_sscale).  Collective where they exchange amaxes (per-tensor),
 * after the caller's agreement. */
gln_status_t gln_sharded_quantize_tensor(gln_sharded_weights_t *sw, float *scale_inv, const float *local_amax);
gln_status_t gln_sharded_quantize_blocks(gln_sharded_weights_t *sw);
/* create: the quantized shard of the zero working shard (no exchange needed: every amax is 0). */
gln_status_t gln_sharded_quantize_initial(gln_sharded_weights_t *sw);
/* quantized_shard per-tensor: the stored decode scales into a gather buffer (a local copy). */
gln_status_t gln_sharded_copy_scales(gln_sharded_weights_t *sw, float *scale_inv);
/* quantized_shard, per-tensor and 128x128: the columnwise copies of a gathered backward buffer
 * (stream-ordered after the gathers; see gln_sharded_qshard_backward_bytes for the layout). */
gln_status_t gln_sharded_columnwise(gln_sharded_weights_t *sw, char *buf);
/* Refresh the FP8 shard from the working shard (quantized_shard; a no-op success without it).
 * local_amax: backend array [N] = per expert, the amax (NaN ignored, as fmaxf) of this rank's
 * part of the working shard (0 for an expert without elements in this shard), or NULL to compute
 * it here.  Collective: agrees first, under fn, with this rank's verdict (INVALID_STATE while a
 * prefetched gather is outstanding).  local_amax is ignored (computed anyway) when
 * fp8_quant.amax_nan_propagate = 1, and unused for BLOCK_2D and MXFP8 (local block scales). */
gln_status_t gln_sharded_requantize(gln_sharded_weights_t *sw, const char *fn, const float *local_amax);
/* The same with this rank's verdict so far (`local`) joining the agreement: a caller that did
 * local work first (sync_working's cast) fails together with the other ranks. */
gln_status_t gln_sharded_requantize_after(gln_sharded_weights_t *sw, const char *fn, gln_status_t local,
                                          const float *local_amax);
/* Fill sw->protocol with the hooks of sharded_protocol.c. */
void gln_sharded_protocol_init(gln_sharded_weights_t *sw);
/* Complete an in-flight finalize (no-op when none); used by wait() and destroy(). */
gln_status_t gln_sharded_complete(gln_sharded_weights_t *sw);
/* Release every materialization still live (destroy: the caller forgot a release). */
void gln_sharded_release_all(gln_sharded_weights_t *sw);

/* The group behind a protocol table when it is one of ours, else NULL (caller-written hooks
 * must make their collectives fail together themselves). */
gln_sharded_weights_t *gln_sharded_of(const gln_dist_weights_t *d);
/* gln_comm_agree over the group's communicator, counted. */
gln_status_t gln_sharded_agree(gln_sharded_weights_t *sw, const char *fn, gln_status_t local,
                               const gln_agree_t *shape);
/* A layer call over the group: begin (plans one agreement: the call's own), plan `more` (the
 * hooks with a collective the call will run), end: a call that failed before joining every
 * agreement it planned joins the next one with its failure, so the other ranks, waiting
 * there, fail too instead of entering a collective alone.  All NULL-safe (sw == NULL: no-op). */
void gln_sharded_call_begin(gln_sharded_weights_t *sw, const char *fn);
void gln_sharded_call_plan(gln_sharded_weights_t *sw, int more);
gln_status_t gln_sharded_call_end(gln_sharded_weights_t *sw, gln_status_t st);

#endif

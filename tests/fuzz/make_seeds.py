#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz harnesses: tests/fuzz/corpus/<name>/<seed>.

Each seed is a header that spells out a meaningful case in the byte format the harness reads
(tests/fuzz/fuzz.h: one byte per choice, reduced into its range; sizes are a selector byte then
a value byte), followed by deterministic pseudo-random bytes that become the tensor data and
the remaining choices.  The first byte is the input's flags: 0 here, so no seed draws wild sizes
or NaN / Inf data (the fuzzer mutates its way there).  Rerun after changing a harness's read
order:  python3 tests/fuzz/make_seeds.py
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def size(v):
    """fz_size: a selector byte that is not wild (low nibble != 0xf), then the value byte."""
    return bytes([0x00, v])


def feature(v, add=120):
    """A size <= 40, then a byte choosing whether to add `add` (fuzz_layer: 120, fuzz_quant:
    100, fuzz_moe: 100)."""
    big = v > 40
    return size(v - (add if big else 0)) + bytes([0xF0 if big else 0x00])


def layer(n, kin, kout, bias, pdt, adt, recipe, fmt, path, flags, hist, splits, params=(0, 0, 0),
          parity=1):
    h = bytes([0, n]) + feature(kin) + feature(kout)
    h += bytes([bias, pdt, adt, recipe, fmt, path, flags, hist])
    h += bytes([2, 0, 0, 0]) + struct.pack("<I", 1234) + bytes([1, parity])  # margin 1, max, eps 0, e8m0 up
    h += bytes(params)
    return h, b"".join(size(s) for s in splits) + bytes([0])


def write(name, seeds, payload=4096):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.remove(os.path.join(d, old))
    rng = random.Random(name)
    for label, head in seeds:
        body = bytes(rng.randrange(0, 0xF8) for _ in range(payload))  # below the special codes
        with open(os.path.join(d, label), "wb") as f:
            f.write(head + body)


def main():
    # Layer: recipe x path x dtypes x parameter forms; config then splits, then data.
    L = []
    for label, args in [
        ("bf16_none_split", dict(n=4, kin=24, kout=40, bias=1, pdt=1, adt=1, recipe=0, fmt=2, path=0,
                                 flags=0x00, hist=1, splits=(0, 5, 17, 3))),
        ("fp16_delayed_grouped", dict(n=3, kin=33, kout=16, bias=1, pdt=2, adt=2, recipe=1, fmt=1, path=1,
                                      flags=0x00, hist=2, splits=(7, 0, 9))),
        ("bf16_current_caller_fused", dict(n=2, kin=32, kout=24, bias=1, pdt=1, adt=1, recipe=2, fmt=2,
                                           path=0, flags=0x01, hist=1, splits=(6, 11), params=(1, 1, 1))),
        ("bf16_mxfp8_grouped_packed", dict(n=2, kin=160, kout=40, bias=1, pdt=1, adt=1, recipe=3, fmt=0,
                                           path=1, flags=0xC1, hist=1, splits=(13, 4), params=(2, 2, 2))),
        ("fp32_block_split_delaywgrad", dict(n=2, kin=130, kout=20, bias=0, pdt=0, adt=0, recipe=4, fmt=2,
                                             path=0, flags=0x02, hist=1, splits=(9, 3))),
    ]:
        head, tail = layer(**args)
        L.append((label, head + tail))
    write("layer", L)

    # Quant / GEMM: one operation per seed (ops byte 0, then the operation's selector).
    quant = [("0_layout_mxfp8", bytes([0, 0, 0, 3, 4]) + size(130) + size(70)),
             ("1_offsets_block1d", bytes([0, 0, 1, 4, 4]) + size(200) + size(0) + size(129) + size(5)
              + size(0) + bytes([0, 1])),
             ("2_quantize_mxfp8", bytes([0, 0, 2, 2, 0, 0x03]) + feature(17) + feature(140, 100) + bytes([1, 1, 1])),
             ("2_quantize_tensor_current", bytes([0, 0, 2, 1, 1, 0x03]) + feature(5) + feature(33)
              + bytes([0])),
             ("3_grouped_quantize_block1d", bytes([0, 0, 3, 3, 0, 0x03, 2]) + feature(133, 100)
              + bytes([0, 7, 19, 1])),
             ("4_gemm", bytes([0, 0, 4])),
             ("5_grouped_gemm", bytes([0, 0, 5])),
             ("6_amax_cast", bytes([0, 0, 6])),
             ("7_swizzle", bytes([0, 0, 7])),
             ("8_quant_gemm_mxfp8", bytes([0, 0, 8, 0]) + feature(20) + feature(24) + feature(130, 100)
              + bytes([2, 0, 0, 2, 0, 0, 0]))]
    write("quant", quant, payload=2048)

    # MoE: activations alone (first choice byte odd), or router -> plan -> permutation.
    moe = [("activations_swiglu", bytes([0, 1, 0]) + size(9) + feature(20, 100) + bytes([0, 1, 1])),
           ("activations_gelu", bytes([0, 1, 1]) + size(5) + size(33) + bytes([0xF0, 0, 2, 0])),
           ("route_permute_top2", bytes([0, 0]) + size(12) + bytes([8, 2])),
           ("route_permute_top1", bytes([0, 0]) + size(7) + bytes([3, 1])),
           ("route_permute_top4", bytes([0, 0]) + size(20) + bytes([5, 4]))]
    write("moe", moe, payload=2048)

    # Communicator: collectives, then the sharded group (+ a layer) over the self communicator.
    # collective: call, dtype + 1, op + 1, count, buffer layout; sharded: experts + 1, dims, ...
    comm = [("allgather_fp32", bytes([0, 0, 1, 0, 1, 1]) + size(40) + bytes([1])),
            ("reduce_scatter_int64", bytes([0, 0, 1, 1, 8, 1]) + size(37) + bytes([1])),
            ("allreduce_in_place", bytes([0, 0, 1, 2, 1, 2]) + size(19) + bytes([2])),
            ("sharded_layer", bytes([0, 0, 0, 3]) + size(8) + size(12) + bytes([1, 1, 0, 0])),
            ("mixed", bytes([0, 3]))]
    write("comm", comm, payload=1024)

    # Sharded group creation: the configuration (fuzz_sharded.c's read order), then the weights.
    S = [("bf16_plain", sharded(3, 5, 7, fp8=0)),
         ("fp32_no_grad_async", sharded(2, 4, 6, bf16=0, rg=0, af=1, fp8=0)),
         ("fp8_tensor_current", sharded(2, 5, 17, fp8=1, mode=1)),
         ("fp8_tensor_eps_pow2_e5m2", sharded(1, 3, 9, fp8=1, mode=1, e5m2=1, eps_idx=1, p2s=1, nanp=1)),
         ("fp8_mxfp8_floor", sharded(2, 3, 128, fp8=1, mode=2, e8m0=1)),
         ("fp8_block2d", sharded(2, 3, 20, fp8=1, mode=4, p2s=1)),
         ("fp8_block1d_refused", sharded(2, 3, 20, fp8=1, mode=3)),
         ("qshard_mxfp8", sharded(3, 20, 256, fp8=1, mode=2, qs=1))]
    write("sharded", S, payload=2048)

    # Delayed-scaling update: slots - 1, history_len - 1, then history, scales, fp8_max, margin,
    # algo and the options drawn from the payload.
    D = [("slots%d_len%d" % (s_, l_), bytes([0, s_ - 1, l_ - 1])) for s_, l_ in ((1, 1), (3, 4), (12, 9), (5, 1))]
    write("delayed", D, payload=1024)

    # Optimizer step: direct calls (second byte 0) and the sharded group's step (3).
    O = [("adamw_bf16", bytes([0, 0]) + opt_cfg(0, wd=1) + opt_call(1, 12, dt=0, work=2)),
         ("adam_l2_fp16_bias_corrections", bytes([0, 0]) + opt_cfg(0, b1=3, b2=1, wd=2, awm=0, bc=(1, 2))
          + opt_call(5, 9, dt=2, work=2)),
         ("sgd_momentum_fp32_alias", bytes([0, 0]) + opt_cfg(1, lr=1, wd=1, mom=1) + opt_call(3, 7, dt=1, work=1)),
         ("sgd_plain_no_working", bytes([0, 0]) + opt_cfg(1, lr=3) + opt_call(2, 11, dt=0, work=0)),
         ("sharded_bf16_adamw", opt_sharded(0, 2, 3, 5, opt_cfg(0, wd=1), step=1)),
         ("sharded_fp8_gather_fp32_sgd", opt_sharded(1, 1, 4, 6, opt_cfg(1, mom=1), step=2, fp32=1)),
         ("sharded_qshard_tensor_adam", opt_sharded(2, 2, 5, 3, opt_cfg(0, awm=0, wd=2), step=4)),
         ("sharded_qshard_block2d", opt_sharded(3, 2, 3, 4, opt_cfg(0), step=7)),
         ("sharded_qshard_mxfp8", opt_sharded(4, 1, 2, 128, opt_cfg(0, wd=1), step=2))]
    write("optimizer", O, payload=1024)


def sharded(n, out, inn, bf16=1, rg=1, af=0, fp8=0, mode=1, e5m2=0, colw=0, eps_idx=0, p2s=0, e8m0=0, nanp=0,
            qs=None):
    """fuzz_sharded's bytes: flags, experts, the two dimensions (128 / 256 through the multiple-
    of-128 choice), dtype and flags (each a 'tame' byte then the value), fp8_quant, version and
    no NULL argument; qs: the quantized_shard choice (1: on where fp8_gather is; None: drawn from
    the payload)."""
    b = [0, 1, n - 1]
    for d in (out, inn):
        b += [0, d // 128 - 1] if d in (128, 256) else [1, 0x00, d]
    b += [1, 1 if bf16 else 0, 1, rg, 1, af, 1, fp8]
    b += [1, mode - 1, 1, 0 if e5m2 else 1, 1, 1, colw, 1, eps_idx, 1, p2s, 1, e8m0, 1, nanp, 1]
    b += [2, 4]
    if qs is not None:
        b += [qs]
    return bytes(b)


def opt_cfg(kind, lr=0, b1=0, b2=1, eps=0, wd=0, awm=1, mom=0, bc=None):
    """fuzz_optimizer's draw_config: each field a 'tame' byte then its index in the field's
    table (lr 1e-3, 0.5, 0, 1; betas 0.9, 0.999, 0, 0.5; eps 1e-8, 1e-3; wd 0, 0.01, 0.5;
    momentum 0, 0.9, 1, 0.5), the known size, then bc: None, or two indices of (1, 0.1, 0.5,
    1e-3, ...) for caller-given bias corrections."""
    b = [1, kind, 1, lr, 1, b1, 1, b2, 1, eps, 1, wd, 1, awm, 1, mom, 1]
    b += [1] if bc is None else [0, bc[0], bc[1]]
    return bytes(b)


def opt_call(step, n, dt, work):
    """Step (1..20), n, working dtype (0 bf16, 1 fp32, 2 fp16), working (0 none, 1 master
    itself, 2 its own buffer), no NULL argument; the element data follows from the payload."""
    return bytes([1, step - 1, n, 1, dt, work, 0])


def opt_sharded(form, n, out, inn, cfg, step, fp32=0):
    """The sharded step: form (0 plain, 1 fp8_gather per-tensor, 2 / 3 / 4 quantized shard
    per-tensor / 128x128 / MXFP8; MXFP8 takes in_features 128), experts, dimensions, dtype,
    requires_grad, FP8 format, power-of-two scales, NaN rule; the weights, the gradient, cfg,
    step, the moments (data bytes below the special codes), no NULL moment, no prefetch."""
    b = [0, 3, form, n - 1, out - 1] + ([] if form == 4 else [inn - 1]) + [fp32, 1, 1, 0, 0]
    rng = random.Random("optimizer-%d" % form)
    elems = n * out * inn
    data = lambda k: bytes(rng.randrange(0, 0xF8) for _ in range(k))
    return bytes(b) + data(2 * elems) + cfg + bytes([1, step - 1]) + data(2 * elems) + bytes([0, 1])


if __name__ == "__main__":
    main()

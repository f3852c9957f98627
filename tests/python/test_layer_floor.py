"""bench/layer_floor.py: the layer-step floors that bench/RESULTS.md reads the layer-step targets against (docs/performance.md).

The byte accounting is checked against numbers worked out by hand for the Qwen3-like shape (every
stage memory-bound there), and the model's invariants on every shape and recipe.
"""
import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "layer_floor.py")
_spec = importlib.util.spec_from_file_location("layer_floor", _PATH)
lf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lf)

TBPS, BF16, FP8 = 4.25, 800.0, 1561.0


def floor(shape, recipe, cached=False):
    stages, flops = lf.layer_floor(shape, recipe, cached, TBPS, BF16, FP8)
    return stages, sum(stages.values()), flops


def test_qwen3_bf16_by_hand():
    # 128 experts x 128 tokens, K 2048, N 768: x 16384 x 2048, W 128 x 768 x 2048, dy 16384 x 768
    x, w, dy = 33_554_432, 201_326_592, 12_582_912
    fprop = 2 * x + 2 * w + 2 * dy          # x, W in; y out (bf16)
    dgrad = 2 * dy + 2 * w + 2 * x          # dy, W in; dx out
    wgrad = 2 * x + 2 * dy + 8 * w          # x, dy in; main_grad FP32 read and written
    stages, total, _ = floor("qwen3", "bf16")
    assert stages["fprop"] == pytest.approx(fprop / (TBPS * 1e12))
    assert stages["dgrad"] == pytest.approx(dgrad / (TBPS * 1e12))
    assert stages["wgrad"] == pytest.approx(wgrad / (TBPS * 1e12))
    assert total * 1e3 == pytest.approx(0.634, abs=0.001)  # the memory floor worked out by hand, ~0.63 ms


def test_quantization_bytes_by_hand():
    # current scaling: amax pass (read 2n) + cast pass (read 2n, write n + n) for x, dy and W
    x, w, dy = 33_554_432, 201_326_592, 12_582_912
    stages, _, _ = floor("qwen3", "fp8-current")
    assert stages["quantize"] == pytest.approx(6 * (x + w + dy) / (TBPS * 1e12))
    stages, _, _ = floor("qwen3", "fp8-delayed", cached=True)  # one pass (4n), weights cached
    assert stages["quantize"] == pytest.approx(4 * (x + dy) / (TBPS * 1e12))


@pytest.mark.parametrize("shape", sorted(lf.SHAPES))
def test_invariants(shape):
    _, bf16_total, flops = floor(shape, "bf16")
    assert flops / bf16_total <= BF16 * 1e12 * (1 + 1e-12)  # never faster than the ceiling
    for recipe in lf.RECIPES:
        stages, total, _ = floor(shape, recipe)
        _, cached_total, _ = floor(shape, recipe, cached=True)
        assert cached_total <= total
        assert all(t > 0 for t in stages.values())
        if recipe.startswith("mxfp8"):  # the emulation runs the bf16 GEMMs: never below bf16
            assert total > bf16_total
        if recipe == "mxfp8-pass":
            assert total > floor(shape, "mxfp8")[1]


def test_unknown_shape_is_refused(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["layer_floor.py", "--shape", "nope"])
    with pytest.raises(SystemExit) as e:
        lf.main()
    assert "must be one of" in str(e.value)

"""The Python API on wrong or edge inputs: the documented error, never a wrong answer read as legal,
never the user's file overwritten (found by an embedder's adversary pass, 2026-11-30)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from fwdshim import reference as R
from fwdshim.classes import ClassId, Q8MatKind
from fwdshim.frontend.export import byte_vocab, random_llama, write_llama
from fwdshim.frontend.gguf_model import LlamaParams, ModelError
from fwdshim.frontend.importer import import_gguf
from fwdshim.frontend.tokenizer import GGUFTokenizer
from fwdshim.passes.fuse import unfused_guards
from fwdshim.shim.forward import ForwardShim, kernel_refusal
from fwdshim.shim.report import report_json, report_table
from fwdshim.tools.profile import profile_model
from fwdshim.tools.runner import Decoder, RunError, generate, gpu_available

TINY = LlamaParams(n_layer=1, d=64, ff=96, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                   vocab=257, context_length=64)  # fmt: skip


def test_supports_takes_the_ir_spelling_and_refuses_what_is_no_class():
    shim = ForwardShim(Q8MatKind.DEQUANT)
    assert shim.supports("norm_weight") == shim.supports(ClassId.NORM_WEIGHT) and shim.supports("norm_weight").is_native
    with pytest.raises(ValueError, match="`bogus` is not a kernel class"):
        shim.supports("bogus")
    for bad in (None, 3):
        with pytest.raises(TypeError, match="expected a ClassId or its name"):
            shim.supports(bad)


def test_fits_and_kernel_refusal_refuse_what_is_no_op():
    """None means "the forward computes it": a non-op must not get that answer."""
    for bad in (None, "fwd.matmul", ModuleOp([]).attributes):
        with pytest.raises(TypeError, match="expected an xDSL Operation"):
            ForwardShim().fits(bad)
        with pytest.raises(TypeError, match="expected an xDSL Operation"):
            kernel_refusal(bad)


def test_the_shim_takes_its_numerics_spelling():
    assert ForwardShim("int8-act").name() == "cuda-forward:Int8Act"
    with pytest.raises(ValueError, match="unknown numerics `int4`"):
        ForwardShim("int4")
    with pytest.raises(TypeError, match="a Q8MatKind or its spelling"):
        ForwardShim(3)


def test_report_functions_check_their_arguments():
    m = ModuleOp([])
    assert report_json(m, "int8-act")["shim"] == "cuda-forward:Int8Act"
    with pytest.raises(TypeError, match="rules: a sequence of rule names, not the string 'norm_weight'"):
        report_table(m, rules="norm_weight")
    with pytest.raises(TypeError, match="a ForwardShim or a numerics name"):
        report_json(m, 3)
    with pytest.raises(TypeError, match="shim: a Shim"):
        unfused_guards(m, None)


def test_import_gguf_checks_context_and_never_writes_over_the_model(tmp_path):
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5))
    before = path.read_bytes()
    for context, why in ((64.5, "context 64.5: a whole number"), ("64", "context '64': a whole number"),
                         (True, "context True"), (1, "holds no cached row"), (12257, "holds at most 12256")):  # fmt: skip
        with pytest.raises(ModelError, match=why):
            import_gguf(path, context=context)
    with pytest.raises(ModelError) as e:
        import_gguf(path, context=1)
    assert str(e.value) == f"{path}: a context of 1 position holds no cached row (need at least 2)"  # was `1 positions`
    with pytest.raises(ModelError, match="the sidecar for converted weights is the model itself"):
        import_gguf(path, sidecar=path)
    assert path.read_bytes() == before
    assert import_gguf(path, context=32).context == 32


def test_api_errors_name_the_parameter_not_the_cli_flag(tmp_path):
    """A Python caller passed `requantize=`, `device=`, `fill=`, `context=`: the error names that
    parameter, never the CLI's `--requantize`, `--device`, `--fill`, `--context`, `--chat` (it did)."""
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab())
    with pytest.raises(ModelError) as e:
        import_gguf(path, requantize="q9")
    assert str(e.value) == f"{path}: unknown requantize='q9' (expected one of: 'q8_0', 'none')"
    model = import_gguf(path, requantize="none", context=2)
    with pytest.raises(RunError) as e:
        Decoder(model, device="tpu")
    assert str(e.value) == "unknown device='tpu' (expected one of: 'auto', 'gpu', 'cpu')"
    decoder = Decoder(model, device="cpu")
    with pytest.raises(RunError) as e:
        generate(decoder, [1, 2, 3], 1)
    full = "the context of 2 positions is full (import_gguf(context=...) sets a larger one; Decoder.reset() starts over)"
    assert str(e.value) == full
    with pytest.raises(ValueError) as e:
        profile_model(model, fill=2)
    assert str(e.value) == "fill=2: the caches hold 0..1 rows (the context less one)"
    with pytest.raises(ModelError) as e:
        GGUFTokenizer(model.reader, path).chat("hi")
    assert str(e.value) == f"{path}: the model has no chat template (`tokenizer.chat_template`)"


@pytest.mark.skipif(gpu_available(), reason="a GPU is here: device='gpu' runs")
def test_decoder_on_gpu_without_one_names_the_parameter(tmp_path):
    model = import_gguf(write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5)), context=2)
    with pytest.raises(RunError) as e:
        Decoder(model, device="gpu")
    assert str(e.value) == "device='gpu': no CUDA GPU (or no fwdshim GPU runtime) here; use device='cpu'"


def test_reference_refuses_what_the_verifier_refuses():
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="eps -1.0: a finite value >= 0"):
        R.rms_norm(x, eps=-1.0)
    with pytest.raises(ValueError, match="eps inf"):
        R.layer_norm(x, eps=float("inf"))
    with pytest.raises(ValueError, match="cap 0.0: a finite value > 0"):
        R.softcap(x, 0.0)
    want = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + np.float32(1e-5))
    assert np.allclose(R.rms_norm(x, eps=1e-5), want, rtol=1e-6)


def test_import_gguf_takes_a_known_model_name(tmp_path, monkeypatch):
    """`import_gguf("smollm2")` fetches the named model as `fwdshim import smollm2` does (here a tiny
    file stands in for the download); an unknown name is a missing file."""
    from fwdshim.frontend import cache

    path = write_llama(tmp_path / "named.gguf", TINY, random_llama(TINY, seed=3), vocab=byte_vocab([]))
    asked = []
    monkeypatch.setattr(cache, "fetch_model", lambda name, quiet=False: asked.append(name) or path)
    m = import_gguf("smollm2", requantize="none", context=8)
    assert asked == ["smollm2"] and m.source_path == path and m.params.d == TINY.d
    with pytest.raises(ModelError, match="no such file"):
        import_gguf(str(tmp_path / "smollm3"), context=8)

"""The Python API on wrong or edge inputs: the documented error, never a wrong answer read as legal,
never the user's file overwritten (found by an embedder's adversary pass, 2026-11-30)."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
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
from fwdshim.tools.runner import Decoder, RunError, compile_step, generate, gpu_available

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
    # an argument's own fault names the parameter, not the file (it said `{path}: context '64': ...`)
    takes = "a whole number of positions, 2 to 12256, or None"
    for context, why in ((64.5, f"context=64.5 (float): {takes}"), ("64", f"context='64' (str): {takes}"),
                         (True, f"context=True (bool): {takes}"),
                         (1, "context=1: at least 2 positions (a context of 1 holds no cached row)"),
                         (0, "context=0: at least 2 positions (a context of 0 holds no cached row)"),
                         (12257, "context=12257: the attention holds at most 12256 positions")):  # fmt: skip
        with pytest.raises(ModelError) as e:
            import_gguf(path, context=context)
        assert str(e.value) == why
    with pytest.raises(ModelError, match="the sidecar for converted weights is the model itself"):
        import_gguf(path, sidecar=path)
    assert path.read_bytes() == before
    assert import_gguf(path, context=32).context == 32


def test_integer_parameters_take_any_integral_number(tmp_path):
    """Every integer parameter of the Python API takes any `numbers.Integral` but a bool: `import_gguf`
    refused `context=np.int64(16)` ("a whole number of positions") while `generate` took NumPy ids."""
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab())
    model = import_gguf(path, requantize="none", context=np.int64(16))
    assert model.context == 16 and type(model.context) is int
    assert import_gguf(path, requantize="none", context=np.uint16(8)).context == 8
    for bad in (np.bool_(True), np.float64(16.0)):
        with pytest.raises(ModelError) as e:
            import_gguf(path, context=bad)
        assert str(e.value) == f"context={bad!r} ({type(bad).__name__}): a whole number of positions, 2 to 12256, or None"
    decoder = Decoder(model, device="cpu")
    out = generate(decoder, [np.uint8(5), np.int16(6)], np.int64(2), stop_ids=[np.int32(-1)])
    assert len(out.tokens) == 2 and decoder.pos == 3
    with pytest.raises(RunError) as e:
        generate(decoder, [5], np.bool_(True))
    assert str(e.value) == "max_tokens=np.True_ (bool): a whole number of tokens to generate (an int), at least 1"
    tok = GGUFTokenizer(model.reader, path)
    assert tok.decode([np.uint8(97), np.int64(98)]) == "ab"


def test_api_errors_name_the_parameter_not_the_cli_flag(tmp_path):
    """A Python caller passed `requantize=`, `device=`, `fill=`, `context=`: the error names that
    parameter, never the CLI's `--requantize`, `--device`, `--fill`, `--context`, `--chat` (it did)."""
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab())
    with pytest.raises(ModelError) as e:  # an argument's fault: the parameter, not the model's path
        import_gguf(path, requantize="q9")
    assert str(e.value) == "requantize='q9': expected one of 'q8_0', 'none'"
    with pytest.raises(ModelError) as e:
        import_gguf(path, requantize=8)
    assert str(e.value) == "requantize=8 (int): expected one of 'q8_0', 'none'"
    model = import_gguf(path, requantize="none", context=2)
    with pytest.raises(RunError) as e:
        Decoder(model, device="tpu")
    assert str(e.value) == "device='tpu': expected one of 'auto', 'gpu', 'cpu'"
    numerics = "expected one of 'dequant', 'int8-act', 'two-pass-int8'"
    for call in (lambda: Decoder(model, "int9"), lambda: compile_step(model, "int9")):  # said "unknown numerics `int9`"
        with pytest.raises(RunError) as e:
            call()
        assert str(e.value) == f"numerics='int9': {numerics}"
    with pytest.raises(RunError) as e:
        Decoder(model, None, device="gpu")  # the argument's fault before the machine's
    assert str(e.value) == f"numerics=None (NoneType): {numerics}"
    decoder = Decoder(model, device="cpu")
    with pytest.raises(RunError) as e:
        generate(decoder, [1, 2, 3], 1)
    full = "the prompt's 3 tokens do not fit the context of 2 positions (import_gguf(context=...) sets a larger one; Decoder.reset() starts over)"
    assert str(e.value) == full
    with pytest.raises(ValueError) as e:
        profile_model(model, fill=2)
    assert str(e.value) == "fill=2: the caches hold 0..1 rows (the context less one)"
    for kw, want in (({"fill": "1"}, "fill='1' (str): a cache fill (an int), 0 to the context less one"),
                     ({"reps": 2.0}, "reps=2.0 (float): a whole number of replays (an int), at least 1"),
                     ({"reps": 0}, "reps=0: at least one replay")):  # fmt: skip
        with pytest.raises(ValueError) as e:
            profile_model(model, **kw)
        assert str(e.value) == want
    if not gpu_available():  # said Numba's driver error (or, under the simulator, an AttributeError)
        with pytest.raises(RunError) as e:
            profile_model(model, fill=1)
        assert str(e.value) == "profile_model times the step on a CUDA GPU, and none is here (Numba's simulator times nothing)"
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
    with pytest.raises(ModelError) as e:  # as the CLI's `--model smolm2` says it (it said "no such file" alone)
        import_gguf("smolm2", context=8)
    assert str(e.value) == "smolm2: no such file, and not a known model name (gemma3-270m, smollm2)"
    with pytest.raises(ModelError) as e:
        import_gguf(tmp_path / "smollm3", context=8)  # a Path is a file, never a name
    assert str(e.value) == f"{tmp_path / 'smollm3'}: no such file"


def test_generate_refuses_bad_arguments_before_any_step(tmp_path):
    """`generate` checks `max_tokens` and every prompt id before stepping: on the CPU a bad id, an
    overlong prompt or `max_tokens=0` had stepped the prompt into the cache first (the next call then
    continued after it; 0 returned no token), and a float id was an IndexError."""
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab())
    decoder = Decoder(import_gguf(path, requantize="none", context=8), device="cpu")
    cases = [
        (([5, 6, 257], 2), "token id 257 is outside the vocabulary of 257"),
        (([5, -1], 2), "token id -1 is outside the vocabulary of 257"),
        (([5, 6.0], 2), "token id 6.0 is not an integer"),
        (([True], 2), "token id True is not an integer"),
        ((list(range(9)), 2), "the prompt's 9 tokens do not fit the context of 8 positions (import_gguf"),
        (([5], 0), "max_tokens=0: ask for at least one token"),
        (([5], -3), "max_tokens=-3: ask for at least one token"),
        (([5], 2.0), "max_tokens=2.0 (float): a whole number of tokens to generate (an int), at least 1"),
        (([5], "4"), "max_tokens='4' (str): a whole number of tokens to generate (an int), at least 1"),
    ]
    for (ids, n), why in cases:
        with pytest.raises(RunError) as e:
            generate(decoder, ids, n)
        assert str(e.value).startswith(why) and decoder.pos == 0, (ids, n)
    first = generate(decoder, [np.int64(5), 6], 1)
    assert first.prompt_ids == [5, 6] and type(first.prompt_ids[0]) is int and decoder.pos == 2
    with pytest.raises(RunError) as e:
        generate(decoder, [1] * 7, 1)
    assert str(e.value).startswith("the prompt's 7 tokens do not fit the context of 8 positions, 2 of them held")
    assert decoder.pos == 2
    generate(decoder, [1] * 6, 1)
    with pytest.raises(RunError) as e:
        generate(decoder, [1], 1)
    assert str(e.value).startswith("the context of 8 positions is full (import_gguf") and decoder.pos == 8
    decoder.reset()
    assert generate(decoder, [5, 6], 1).tokens == first.tokens


def test_decoder_pos_rewinds_only_to_written_rows(tmp_path):
    """`Decoder.pos` could be set to anything: `d.pos = -3` then `step()` read cache rows never written
    and returned plausible logits. It rewinds within the rows written (a step at p keeps the rows before
    it); `assume_filled` is the benchmarks' explicit way to take unwritten rows as filled."""
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab())
    decoder = Decoder(import_gguf(path, requantize="none", context=8), device="cpu")
    first = [decoder.step(t) for t in (5, 6, 7)]
    for bad in (-3, 4, 2.0, True, "1", None):
        with pytest.raises(RunError) as e:
            decoder.pos = bad
        shown = repr(bad) if isinstance(bad, int) and not isinstance(bad, bool) else f"{bad!r} ({type(bad).__name__})"
        assert str(e.value) == f"pos={shown}: a position from 0 to 3, the rows this decoder has written (Decoder.reset() starts over)"
        assert decoder.pos == 3
    decoder.pos = np.int64(1)  # a rewind: the step at 1 sees row 0 only, as the first time
    assert decoder.pos == 1 and type(decoder.pos) is int
    np.testing.assert_array_equal(decoder.step(6), first[1])
    with pytest.raises(RunError, match=r"^pos=3: a position from 0 to 2, "):  # row 2 was computed from the old row 1
        decoder.pos = 3
    decoder.pos = 0
    decoder.pos = 2  # back to where it was: nothing stepped in between
    decoder.reset()
    with pytest.raises(RunError, match=r"^pos=1: a position from 0 to 0, "):
        decoder.pos = 1
    decoder.assume_filled(5)
    assert decoder.pos == 5 and generate(decoder, [5], 1).tokens and decoder.pos == 6
    decoder.pos = 2
    for bad in (-1, 8, 3.0):
        with pytest.raises(RunError) as e:
            decoder.assume_filled(bad)
        shown = repr(bad) if isinstance(bad, int) else f"{bad!r} ({type(bad).__name__})"
        assert str(e.value) == f"rows={shown}: a cache fill from 0 to 7 (the context less one)"
    assert decoder.pos == 2


def test_decode_refuses_ids_outside_the_vocabulary(tmp_path):
    """`tokenizers` decoded an id past the vocabulary as no text at all and failed on a negative one
    (OverflowError)."""
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab())
    tok = GGUFTokenizer(import_gguf(path, requantize="none", context=8).reader, path)
    assert tok.decode(tok.encode("abc")) == "abc" and tok.decode([np.int32(97)]) == tok.decode([97])
    for bad in (tok.vocab_size, -1, 2.5):
        with pytest.raises(ModelError) as e:
            tok.decode([97, bad])
        assert str(e.value) == f"{path}: token id {bad!r} is not an id of the vocabulary (0 to {tok.vocab_size - 1})"


def test_wrong_argument_types_name_the_parameter(tmp_path):
    """A wrong-type argument to the README's Python API is ModelError / RunError naming the parameter
    and what it takes: `import_gguf(123)` was pathlib's TypeError ("expected str, bytes or
    os.PathLike object, not int"), `Decoder("m.gguf")` an AttributeError on `.params`, `generate(d, 5, 1)`
    "'int' object is not iterable", `tok.encode(3)` tokenizers' "TextInputSequence must be str"."""
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab())
    accepts = "a GGUF file's path (a str or os.PathLike) or a known model's name (\"smollm2\", \"gemma3-270m\")"
    model_cases = [
        (lambda: import_gguf(123), f"path=123 (int): {accepts}"),
        (lambda: import_gguf(None), f"path=None (NoneType): {accepts}"),
        (lambda: import_gguf(b"m.gguf"), f"path=b'm.gguf' (bytes): {accepts}"),
        (lambda: import_gguf(path, sidecar=7),
         "sidecar=7 (int): the path (a str or os.PathLike) to write converted weights to, or None"),
        (lambda: import_gguf(path, source_name=3),
         "source_name=3 (int): a file name (a str) to locate the step's ops in, or None"),
    ]  # fmt: skip
    for call, want in model_cases:
        with pytest.raises(ModelError) as e:
            call()
        assert str(e.value) == want
    model = import_gguf(path, requantize="none", context=8)
    with pytest.raises(ModelError) as e:
        GGUFTokenizer(model, path)
    assert str(e.value) == f"{path}: reader=<ImportedModel>: a gguf.GGUFReader (an ImportedModel's `reader`)"
    with pytest.raises(ModelError) as e:
        GGUFTokenizer(model.reader, 3)
    assert str(e.value) == "path=3 (int): the GGUF file's path (a str or os.PathLike), named in errors"
    tok = GGUFTokenizer(model.reader, path)
    tok_cases = [
        (lambda: tok.encode(3), "text=3 (int): a str"),
        (lambda: tok.encode(b"ab"), "text=b'ab' (bytes): a str"),
        (lambda: tok.decode(97), "ids=97 (int): a sequence of token ids (integers)"),
        (lambda: tok.decode("ab"), "ids='ab' (str): a sequence of token ids (integers)"),
        (lambda: tok.chat(None), "prompt=None (NoneType): a str"),
    ]
    for call, want in tok_cases:
        with pytest.raises(ModelError) as e:
            call()
        assert str(e.value) == f"{path}: {want}"
    decoder = Decoder(model, device="cpu")
    run_cases = [
        (lambda: compile_step(model.module), "model=<ModuleOp>: an ImportedModel (import_gguf's result)"),
        (lambda: Decoder(None), "model=None (NoneType): an ImportedModel (import_gguf's result)"),
        (lambda: generate(model, [1], 1), "decoder=<ImportedModel>: a Decoder"),
        (lambda: generate(decoder, 5, 1),
         "prompt_ids=5 (int): an iterable of token ids (GGUFTokenizer.encode gives them)"),
        (lambda: generate(decoder, "ab", 1),
         "prompt_ids='ab' (str): an iterable of token ids (GGUFTokenizer.encode gives them)"),
        (lambda: generate(decoder, {3, 1, 2}, 1),  # a set's order is arbitrary: the prompt was scrambled
         "prompt_ids=<set>: the token ids in order, a list or tuple, not a set (GGUFTokenizer.encode gives them)"),
        (lambda: generate(decoder, {3: "a"}, 1),
         "prompt_ids=<dict>: the token ids in order, a list or tuple, not a dict (GGUFTokenizer.encode gives them)"),
        (lambda: generate(decoder, [1], 1, stop_ids=2), "stop_ids=2 (int): an iterable of token ids"),
        (lambda: generate(decoder, [1], 2, on_token="print"),
         "on_token='print' (str): a callable taking a token id, or None"),
        (lambda: decoder.step("a"), "token id 'a' is not an integer"),
    ]  # fmt: skip
    for call, want in run_cases:
        with pytest.raises(RunError) as e:
            call()
        assert str(e.value) == want
    assert decoder.pos == 0
    assert generate(decoder, [5, 6], 1, stop_ids=[], on_token=print).prompt_ids == [5, 6]
    assert generate(decoder, (7, 8), 1, stop_ids={3, 4}).prompt_ids == [7, 8]  # stop ids: a set is fine


def test_import_gguf_checks_its_sidecar_before_writing_it(tmp_path):
    """`sidecar=` is checked as `fwdshim import --weights` is: a device was replaced by a regular file
    (`sidecar="/dev/null"` as root: here a FIFO stands for it), a user's file or another model was
    overwritten, a missing directory was made, `sidecar="new/"` was written as a file `new`, and
    `sidecar=""` failed inside pathlib."""
    types = {"blk.0.attn_norm.weight": QT.F16}  # a norm to widen to F32: the sidecar is written
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab(), types=types)
    other = write_llama(tmp_path / "other.gguf", TINY, random_llama(TINY, seed=6))
    notes = tmp_path / "notes.txt"
    notes.write_text("precious")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "dir").mkdir()
    cases = [
        ("", "sidecar='': an empty path; the path (a str or os.PathLike) to write converted weights to, or None"),
        (tmp_path / "dir", f"sidecar='{tmp_path / 'dir'}': is a directory (give the path of a file to write "
                           "converted weights to)"),
        (f"{tmp_path / 'new'}/", f"sidecar='{tmp_path / 'new'}/': names a directory (it ends in a separator; give "
                                 "the path of a file to write converted weights to)"),  # was written as a file `new`
        (fifo, f"sidecar='{fifo}': not a regular file (converted weights are a GGUF file the step reads)"),
        (tmp_path / "no" / "w.gguf", f"sidecar='{tmp_path / 'no' / 'w.gguf'}': no such directory {tmp_path / 'no'}"),
        (notes, f"sidecar='{notes}': the file exists and is not weights fwdshim converted (remove it, or give "
                "another path)"),
        (other, f"sidecar='{other}': the file exists and is not weights fwdshim converted (remove it, or give "
                "another path)"),
    ]  # fmt: skip
    before = other.read_bytes()
    for sidecar, want in cases:
        with pytest.raises(ModelError) as e:
            import_gguf(path, requantize="none", sidecar=sidecar)
        assert str(e.value) == want
    assert notes.read_text() == "precious" and other.read_bytes() == before
    assert stat.S_ISFIFO(fifo.stat().st_mode) and not (tmp_path / "no").exists() and not (tmp_path / "new").exists()
    with pytest.raises(ModelError) as e:
        import_gguf("")
    assert str(e.value).startswith("path='': an empty path; a GGUF file's path")  # was ".: is a directory"
    link = tmp_path / "link.gguf"
    link.symlink_to(tmp_path / "w.gguf")  # written through the link, which stays a link
    for _ in range(2):  # and written again: a file fwdshim converted
        model = import_gguf(path, requantize="none", sidecar=link)
        assert model.gguf_path == tmp_path / "w.gguf" and link.is_symlink()
        assert set(model.converted) == {"blk.0.attn_norm.weight"}


def test_tokenizer_refuses_a_lone_surrogate_by_name(tmp_path):
    """A str holding a lone surrogate (what `os.fsdecode` makes of bytes that are not UTF-8) was
    tokenizers' TypeError "TextInputSequence must be str" from `encode` and `chat`."""
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab())
    tok = GGUFTokenizer(import_gguf(path, requantize="none", context=8).reader, path)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    cases = [
        (lambda: tok.encode("ab\udcff"), "text: character 2 is U+DCFF"),
        (lambda: tok.chat("\ud800"), "prompt: character 0 is U+D800"),
        (lambda: tok.chat("hi", system="x\udc80"), "system: character 1 is U+DC80"),
    ]
    for call, want in cases:
        with pytest.raises(ModelError) as e:
            call()
        assert str(e.value) == f"{path}: {want}, a lone surrogate (not text: UTF-8 cannot encode it)"
    assert tok.encode("ab") == [97, 98] and tok.chat("ab") == "ab"


def test_generate_refuses_stop_ids_that_are_no_token_ids(tmp_path):
    """A stop id that is no integer never equals a pick: `stop_ids=["<|im_end|>"]` (a token's text, not
    its id) ran to `max_tokens` without a word."""
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab())
    decoder = Decoder(import_gguf(path, requantize="none", context=8), device="cpu")
    for stops, want in ((["<|im_end|>"], "'<|im_end|>'"), ([3, 2.0], "2.0"), ({True}, "True")):
        with pytest.raises(RunError) as e:
            generate(decoder, [5, 6], 2, stop_ids=stops)
        assert str(e.value) == f"stop_ids: {want} is not a token id (an integer)"
    assert decoder.pos == 0
    first = generate(decoder, [5, 6], 1).tokens
    decoder.reset()
    assert generate(decoder, [5, 6], 3, stop_ids=[np.int64(first[0])]).tokens == first  # numpy ids stop it

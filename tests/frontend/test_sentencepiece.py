"""SentencePiece vocabularies (`tokenizer.ggml.model = llama`: Mistral, Phi-3, Gemma files): fwdshim's
tokenizer against transformers' own, built from the same GGUF (issue 41). The Gemma 3 270M file's
tokenizer is checked in `test_gemma3_270m.py`."""

from __future__ import annotations

from dataclasses import replace

from support.llama_numpy import TINY

from fwdshim.frontend.export import random_llama, spm_vocab, write_llama
from fwdshim.frontend.gguf_model import open_gguf
from fwdshim.frontend.tokenizer import GGUFTokenizer

PIECES = [
    "▁", *"abcdefghijklmnopqrstuvwxyzTFH,.!?", "▁t", "he", "▁the", "▁c", "ap", "▁cap", "it", "al", "ital",
    "▁capital", "▁o", "▁of", "▁F", "ra", "ce", "nce", "▁Fra", "▁France", "▁i", "▁is", "▁▁", "▁▁▁▁",
    "in", "▁in", "▁w", "or", "ld", "▁world", "He", "ll", "Hello", "▁a", "an", "▁an", "nd", "▁and",
]  # fmt: skip
"""Pieces as SentencePiece scores them, best first: merged words, two and four spaces, letters."""

TEXTS = [
    "the capital of France is", "Hello, world!", "an and in", "a  b    c", "naïve café 日本語 🎉",
    "tabs\tand\nnewlines\n", "x", "the" * 20,
]  # fmt: skip
SPECIAL = "<s>the</s>Hello"
"""Control tokens written in a text: llama.cpp prefixes the text after each with a space."""


def _files(tmp_path):
    tokens, scores, types = spm_vocab(PIECES)
    out = {}
    for arch in ("llama", "phi3"):
        p = replace(TINY, arch=arch, vocab=len(tokens))
        out[arch] = write_llama(tmp_path / arch / "m.gguf", p, random_llama(p, seed=1), spm=(tokens, scores, types))
    return tokens, out


def test_sentencepiece_vocabulary_tokenizes_as_transformers(tmp_path):
    """Mistral's (`llama`) and Phi-3's SentencePiece vocabularies: each text (characters no piece
    spells as their UTF-8 bytes' `<0xXX>` tokens, runs of spaces) gives transformers' ids and decodes
    back to itself. Control tokens written in a text are matched whole and the text after each is
    prefixed by a space, as llama.cpp does: transformers' Phi-3 builder agrees, its Llama tokenizer
    (Metaspace, prepend "first") prefixes only the first text."""
    from transformers import AutoTokenizer

    tokens, paths = _files(tmp_path)
    for arch, path in paths.items():
        ours = GGUFTokenizer(open_gguf(path), path)
        assert ours.add_bos and ours.bos_id == 1 and ours.eos_id == 2
        peer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        for text in TEXTS:
            ids = ours.encode(text)
            assert ids == peer.encode(text), (arch, text)
            assert ours.decode(ids[1:]) == text
        special = ours.encode(SPECIAL)
        assert special == [1, 1, tokens.index("▁the"), 2, *(tokens.index(t) for t in ("▁", "He", "ll", "o"))]
        assert (special == peer.encode(SPECIAL)) == (arch == "phi3"), arch
    ours = GGUFTokenizer(open_gguf(paths["llama"]), paths["llama"])
    assert ours.encode("the capital of France is") == [1, *(tokens.index(p) for p in ("▁the", "▁capital", "▁of", "▁France", "▁is"))]
    assert ours.encode("é")[1:] == [tokens.index("▁"), 3 + 0xC3, 3 + 0xA9]  # no piece: its UTF-8 bytes


def test_a_leading_space_is_kept_as_llama_cpp_keeps_it(tmp_path):
    """llama.cpp prefixes every text with a space and spells each space `▁`: "  hi" is `▁▁▁hi`.
    transformers' Llama tokenizer (Metaspace, prepend "first") adds no prefix before a leading
    space, and reads it as `▁▁hi`; fwdshim tokenizes as llama.cpp does (transformers' Phi-3 builder agrees)."""
    from transformers import AutoTokenizer

    tokens, paths = _files(tmp_path)
    path = paths["llama"]
    ours = GGUFTokenizer(open_gguf(path), path).encode("  the")
    assert ours == [1, tokens.index("▁▁"), tokens.index("▁the")]
    assert AutoTokenizer.from_pretrained(path.parent, gguf_file="m.gguf").encode("  the") == [1, tokens.index("▁"), tokens.index("▁the")]


def test_a_mistral_file_runs(tmp_path, monkeypatch, capsys):
    """A Mistral file (architecture `llama`, a SentencePiece vocabulary, no sliding window: v0.2 on)
    runs from its prompt text to tokens, as `fwdshim run` does it on the CPU."""
    from fwdshim.tools import cli

    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    tokens, paths = _files(tmp_path)
    rc = cli.main(["run", "--model", str(paths["llama"]), "--prompt", "the capital of France is", "--max-tokens", "4",
                   "--device", "cpu", "--context", "32"])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert out.out.startswith("the capital of France is") and "fwdshim: 4 tokens" in out.err

"""Helpers the tests share (from tests/tools/test_cli.py, which imports them from here, as others do)."""

from __future__ import annotations

from pathlib import Path

from fwdshim.frontend.export import byte_vocab, random_llama, write_llama
from fwdshim.frontend.gguf_model import LlamaParams

TINY = LlamaParams(n_layer=2, d=64, ff=96, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                   vocab=262, context_length=256)  # fmt: skip


MERGES = [("a", "b"), ("ab", "c"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he")]


def tiny(tmp_path: Path, **kw) -> Path:
    return write_llama(
        tmp_path / "tiny.gguf", TINY, random_llama(TINY, seed=9), vocab=byte_vocab(MERGES), **kw
    )

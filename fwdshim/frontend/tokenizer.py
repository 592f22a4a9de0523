"""The tokenizer a GGUF file describes, built with Hugging Face `tokenizers` from its own metadata.

A GGUF of `tokenizer.ggml.model = gpt2` (byte-level BPE: SmolLM2, Llama 3, Qwen 2, ...) holds its
vocabulary (`tokenizer.ggml.tokens`, spelled in GPT-2's byte alphabet), its merges
(`tokenizer.ggml.merges`, `"a b"` in rank order), the kind of each token (`token_type`: 3 control, 4
user-defined) and the name of its pre-tokenizer (`tokenizer.ggml.pre`). `GGUFTokenizer` builds a
`tokenizers.Tokenizer` from exactly those: a BPE model of the vocabulary and merges, the pre-tokenizer
llama.cpp uses for that name (`PRE_TOKENIZERS`; whole words looked up first for `IGNORE_MERGES`),
a byte-level decoder, and control / user-defined
tokens matched whole in the text. There is no hand-written BPE here.

`encode(text)` adds the BOS token only when `tokenizer.ggml.add_bos_token` says so; `chat(prompt)`
renders the file's own `tokenizer.chat_template` (Jinja, sandboxed, in a child process killed after
`TEMPLATE_SECONDS`: `chat_template`) for one user message.

Errors: a file without a vocabulary, of another tokenizer model or pre-tokenizer, or whose
vocabulary, token types and merges disagree, and a chat template that fails, raise `ModelError`
with one line naming the file. A BOS or EOS id outside the vocabulary is left out, one line in
`warnings` saying so (llama.cpp warns and runs such a file).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from fwdshim.frontend import chat_template
from fwdshim.frontend.chat_template import TEMPLATE_BITS, TEMPLATE_CHARS  # noqa: F401 - the limits, said here too
from fwdshim.frontend.gguf_model import ModelError, argument_text, field_value, is_integer, path_argument

_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN2_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

PRE_TOKENIZERS: dict[str, tuple[str, ...]] = {
    # llama.cpp's `llama_vocab` regexes per `tokenizer.ggml.pre`, applied in order (each isolating its matches)
    "default": (_GPT2_SPLIT,),
    "gpt-2": (_GPT2_SPLIT,),
    "gpt2": (_GPT2_SPLIT,),
    "smollm": (r"\p{N}", _GPT2_SPLIT),
    "starcoder": (r"\p{N}", _GPT2_SPLIT),
    "refact": (r"\p{N}", _GPT2_SPLIT),
    "llama-bpe": (_LLAMA3_SPLIT,),
    "llama3": (_LLAMA3_SPLIT,),
    "qwen2": (_QWEN2_SPLIT,),
}
"""The splitting regexes of each supported pre-tokenizer name."""

IGNORE_MERGES = frozenset({"llama-bpe", "llama3"})
"""Pre-tokenizers whose words are looked up whole in the vocabulary before any merge is applied
(llama.cpp's `ignore_merges` of LLAMA3; HF's BPE `ignore_merges=True` in Llama 3's tokenizer.json):
a word that is a token is that one token even when no merge builds it."""


def _pre_tokenizer(name: str) -> pre_tokenizers.PreTokenizer:
    splits = [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in PRE_TOKENIZERS[name]]
    return pre_tokenizers.Sequence(
        [*splits, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )


class GGUFTokenizer:
    """The byte-level BPE tokenizer of a GGUF file (see the module docstring).

    `bos_id`, `eos_id` (None when absent), `add_bos`, `stop_ids` (the EOS token and every control token
    named like an end of turn), `vocab_size`."""

    def __init__(self, reader: gguf.GGUFReader, path: str | Path):
        self.path = path_argument("path", path, "the GGUF file's path (a str or os.PathLike), named in errors")
        if not isinstance(reader, gguf.GGUFReader):
            raise ModelError(
                f"{path}: reader={argument_text(reader)}: a gguf.GGUFReader "
                "(an ImportedModel's `reader`)"
            )
        kind = field_value(reader, "tokenizer.ggml.model")
        if kind is None:
            raise ModelError(f"{path}: no tokenizer in the GGUF metadata (`tokenizer.ggml.model`)")
        if kind not in TOKENIZER_MODELS:
            raise ModelError(
                f"{path}: tokenizer `{kind}` is not supported (fwdshim reads byte-level BPE `gpt2` and "
                "SentencePiece `llama` vocabularies)"
            )
        pre = field_value(reader, "tokenizer.ggml.pre", "default")
        if kind == "llama":
            self._sentencepiece(reader, path)
            return
        if pre not in PRE_TOKENIZERS:
            raise ModelError(
                f"{path}: pre-tokenizer `{pre}` is not supported (known: {', '.join(sorted(PRE_TOKENIZERS))})"
            )
        tokens: list[str] = field_value(reader, "tokenizer.ggml.tokens", [])
        merges: list[str] = field_value(reader, "tokenizer.ggml.merges", [])
        types: list[int] = list(field_value(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))
        if not tokens:
            raise ModelError(f"{path}: the tokenizer has no `tokenizer.ggml.tokens`")
        if len(types) != len(tokens):
            raise ModelError(
                f"{path}: `tokenizer.ggml.token_type` has {len(types)} entries for {len(tokens)} tokens"
            )
        bad = next((m for m in merges if not isinstance(m, str) or " " not in m), None)
        if bad is not None:
            raise ModelError(f"{path}: merge {bad!r} of `tokenizer.ggml.merges` is not two tokens `a b`")
        vocab = {t: i for i, t in enumerate(tokens)}
        pairs = [tuple(m.split(" ", 1)) for m in merges]
        try:
            bpe = models.BPE(
                vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False, ignore_merges=pre in IGNORE_MERGES
            )
        except Exception as e:  # tokenizers' own check of the merges against the vocabulary
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ModelError(f"{path}: the tokenizer's vocabulary and merges do not agree ({first})") from None
        tok = Tokenizer(bpe)
        tok.pre_tokenizer = _pre_tokenizer(pre)
        tok.decoder = decoders.ByteLevel()
        self._finish(reader, tok, tokens, types, sentencepiece=False)

    def _finish(self, reader: gguf.GGUFReader, tok: Tokenizer, tokens: list[str], types: list[int], sentencepiece: bool) -> None:
        """The file's control tokens matched whole as special, its user-defined ones as added tokens;
        the BOS/EOS ids, `add_bos_token` (default: true for a SentencePiece vocabulary, as llama.cpp),
        the chat template and the stop ids."""
        control = [t for t, k in zip(tokens, types) if k == gguf.TokenType.CONTROL]
        user = [t for t, k in zip(tokens, types) if k == gguf.TokenType.USER_DEFINED]
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in user])
        self._tok = tok
        self._sentencepiece_model = sentencepiece
        self.tokens = tokens
        self.vocab_size = len(tokens)
        self.warnings: list[str] = []
        self.bos_id = self._token_id(reader, "tokenizer.ggml.bos_token_id")
        self.eos_id = self._token_id(reader, "tokenizer.ggml.eos_token_id")
        self.add_bos = bool(field_value(reader, "tokenizer.ggml.add_bos_token", sentencepiece))
        self.chat_template = field_value(reader, "tokenizer.chat_template")
        ends = {
            i for i, (t, k) in enumerate(zip(tokens, types)) if k == gguf.TokenType.CONTROL and _ends_turn(t)
        }
        self.stop_ids = frozenset(ends | ({self.eos_id} if self.eos_id is not None else set()))

    def _sentencepiece(self, reader: gguf.GGUFReader, path) -> None:
        """A SentencePiece vocabulary (`tokenizer.ggml.model = llama`: Mistral, Phi-3, Gemma) as llama.cpp
        tokenizes it: each text between special tokens prefixed by a space when
        `tokenizer.ggml.add_space_prefix` (default true), spaces spelled `▁`, then the adjacent pair
        whose joined piece scores highest merged first (a BPE of the merges that every split of a
        vocabulary piece into two pieces implies, ranked by the joined piece's score; Gemma's by its
        place in the vocabulary, as transformers ranks them), an unknown character as its UTF-8 bytes'
        `<0xXX>` tokens. BOS is added unless `tokenizer.ggml.add_bos_token` is false."""
        tokens: list[str] = list(field_value(reader, "tokenizer.ggml.tokens", []))
        if not tokens:
            raise ModelError(f"{path}: the tokenizer has no `tokenizer.ggml.tokens`")
        types = list(field_value(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))
        scores = list(field_value(reader, "tokenizer.ggml.scores", []))
        for key, values in (("token_type", types), ("scores", scores)):
            if len(values) != len(tokens):
                raise ModelError(f"{path}: `tokenizer.ggml.{key}` has {len(values)} entries for {len(tokens)} tokens")
        if field_value(reader, "general.architecture") in ("gemma", "gemma2", "gemma3"):
            # Gemma files spell a piece of two or more spaces with spaces, looked up as `▁`s; its merges
            # rank by place in the vocabulary (its scores do not follow them: transformers' gemma builder)
            tokens = ["\u2581" * len(t) if len(t) > 1 and not t.strip(" ") else t for t in tokens]
            scores = [-float(i) for i in range(len(tokens))]
        vocab = {t: i for i, t in enumerate(tokens)}
        unk = field_value(reader, "tokenizer.ggml.unknown_token_id")
        bpe = models.BPE(
            vocab=vocab, merges=_implied_merges(tokens, scores, vocab), fuse_unk=True, byte_fallback=True,
            unk_token=tokens[unk] if is_integer(unk) and 0 <= unk < len(tokens) else None,
        )  # fmt: skip
        tok = Tokenizer(bpe)
        prefix = bool(field_value(reader, "tokenizer.ggml.add_space_prefix", True))
        spaces = [normalizers.Replace(" ", "\u2581")]
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), *spaces] if prefix else spaces)
        steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
        tok.decoder = decoders.Sequence([*steps, decoders.Strip(content=" ", left=1)] if prefix else steps)
        self._finish(reader, tok, tokens, types, sentencepiece=True)

    def _token_id(self, reader: gguf.GGUFReader, key: str) -> int | None:
        """The token id metadata `key` holds (an integer: `gguf_layout.check_metadata`), or None.

        One that is not an id of the vocabulary is left out with a line in `warnings`, as llama.cpp
        does ("bad special token": it warns and runs with its default)."""
        i = field_value(reader, key)
        if i is not None and not 0 <= i < len(self.tokens):
            self.warnings.append(
                f"{self.path}: `{key}` = {i} is not a token id (the vocabulary holds {len(self.tokens)}): "
                "running without it"
            )
            return None
        return i

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (control tokens written in the text are matched whole).

        Raises: ModelError when the vocabulary spells some character of `text` with no token (a
        file without every byte's token, or with two tokens of one spelling): BPE would drop it, and
        the model would read another text, and for a `text` that is not a str or holds a lone
        surrogate."""
        self._check_text("text", text)
        ids = self._tok.encode(text, add_special_tokens=False).ids
        # byte-level BPE round-trips every text its vocabulary can spell; SentencePiece adds a space
        # after each control token (as llama.cpp does), so its text is checked a character at a time
        lost = self._unspelled(text) if self._sentencepiece_model else None
        if lost or (lost is None and self._tok.decode(ids, skip_special_tokens=False) != text):
            lost = lost or self._unspelled(text)
            chars = ", ".join(repr(c) for c in lost[:8]) + (f" and {len(lost) - 8} more" if len(lost) > 8 else "")
            raise ModelError(f"{self.path}: the vocabulary has no token for {chars or 'part of the text'}: "
                             "the text cannot be encoded as written")  # fmt: skip
        if self.add_bos and self.bos_id is not None:
            ids = [self.bos_id, *ids]
        return ids

    def _unspelled(self, text: str) -> list[str]:
        """The characters of `text` (each once, in order) that do not come back from their own
        encoding: BPE drops a byte the vocabulary has no token for. One encoding per distinct
        character, linear in the text (a diff of the text against its round trip, by difflib, took
        12 s for a prompt of 32 K characters, and grew with the square of its length)."""
        lost = []
        for c in dict.fromkeys(text):
            if self._tok.decode(self._tok.encode(c, add_special_tokens=False).ids, skip_special_tokens=False) != c:
                lost.append(c)
        return lost

    def _check_text(self, name: str, value, alternative: str = "") -> None:
        """ModelError naming parameter `name` unless `value` is a str that UTF-8 encodes (a lone
        surrogate, as `os.fsdecode` makes of bytes that are not UTF-8, failed inside tokenizers:
        "TextInputSequence must be str")."""
        if not isinstance(value, str):
            raise ModelError(f"{self.path}: {name}={argument_text(value)}: a str{alternative}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ModelError(
                f"{self.path}: {name}: character {e.start} is U+{ord(value[e.start]):04X}, a lone surrogate "
                "(not text: UTF-8 cannot encode it)"
            ) from None

    def decode(self, ids: list[int], *, skip_special: bool = False) -> str:
        """The text of token ids.

        Raises: ModelError for an id that is no integer or outside the vocabulary (`tokenizers` left
        one past the end out of the text without a word, and failed on a negative one), and for `ids`
        that are no sequence of ids (a str, a single int)."""
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise ModelError(
                f"{self.path}: ids={argument_text(ids)}: a sequence of token ids (integers)"
            )
        ids = list(ids)
        for i in ids:
            if not is_integer(i) or not 0 <= i < len(self.tokens):
                raise ModelError(f"{self.path}: token id {i!r} is not an id of the vocabulary (0 to {len(self.tokens) - 1})")
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special)

    def chat(self, prompt: str, system: str | None = None) -> str:
        """`prompt` as one user turn of the file's chat template, ready for the assistant's answer.

        Raises: ModelError when the file has no chat template, or `prompt` (`system`) is not a str
        (not None) or holds a lone surrogate, and when the template fails: its own errors, a rendering
        past `TEMPLATE_SECONDS` or `TEMPLATE_CHARS`, a `**` or `*` whose result would pass
        `TEMPLATE_BITS` bits or `TEMPLATE_CHARS` items (refused before it is computed)."""
        self._check_text("prompt", prompt)
        if system is not None:
            self._check_text("system", system, " or None")
        if not self.chat_template:
            raise ModelError(
                f"{self.path}: the model has no chat template (`tokenizer.chat_template`)"
            )
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt}
        ]
        name = lambda i: self.tokens[i] if i is not None and 0 <= i < len(self.tokens) else ""  # noqa: E731

        def fails(why: str, line: str = "") -> ModelError:
            return ModelError(f"{self.path}: the chat template (`tokenizer.chat_template`{line}) fails: {why}")

        try:
            text = chat_template.render(
                self.chat_template, seconds=TEMPLATE_SECONDS, prompt_chars=len(prompt), messages=messages,
                add_generation_prompt=True, bos_token=name(self.bos_id), eos_token=name(self.eos_id),
            )  # fmt: skip
        except chat_template.TemplateRefused as e:
            raise ModelError(f"{self.path}: the chat template refused the prompt: {e}") from None
        except chat_template.TemplateFailed as e:
            raise fails(str(e), e.line) from None
        if not text.strip():
            raise fails("it renders no text")
        return text


TOKENIZER_MODELS = ("gpt2", "llama")
"""The `tokenizer.ggml.model` values fwdshim reads: byte-level BPE and SentencePiece."""


def _implied_merges(tokens: list[str], scores: list[float], vocab: dict[str, int]) -> list[tuple[str, str]]:
    """The merges a SentencePiece vocabulary implies: every split of a piece into two pieces of the
    vocabulary, ranked by the joined piece's score, best first (ties: the longer left piece, then the
    longer right, as transformers' `generate_merges` sorts them; one piece's splits by the two pieces'
    ids)."""
    merges = []
    for token, score in zip(tokens, scores):
        if len(token) < 2:
            continue
        splits = []
        for i in range(1, len(token)):
            left = vocab.get(token[:i])
            if left is not None and (right := vocab.get(token[i:])) is not None:
                splits.append((left, right, i))
        if len(splits) > 1:
            splits.sort()
        merges.extend((score, i, len(token) - i, token[:i], token[i:]) for _, _, i in splits)
    merges.sort(key=lambda m: m[:3], reverse=True)
    return [(left, right) for *_, left, right in merges]


TEMPLATE_SECONDS = 10
"""The longest a chat template may take to render (a file's template is code from the file): its
rendering process is killed then (`chat_template.render`)."""

def _ends_turn(token: str) -> bool:
    t = token.lower()
    return any(s in t for s in ("im_end", "eot", "end_of_turn", "endoftext", "<|end|>"))

"""A GGUF file's chat template (Jinja: code from the file) rendered where it can be stopped.

`render(...)` renders the template in a child Python process (this module run by `sys.executable`,
importing Jinja and nothing else of fwdshim) that is killed after `seconds` and may use at most
`TEMPLATE_BYTES` of memory: a time limit inside the process (a SIGALRM) cannot interrupt one long C
call — `3 ** 300000000`, `'x'.center(10**10)`, `'%0999999999d' % 1` each ran for minutes past it.
In the child, Jinja's immutable sandbox refuses a `**` or `*` whose result would pass `TEMPLATE_BITS`
bits or `TEMPLATE_CHARS` items before computing it (`intercepted_binops`), saying which, and a
rendering longer than the caller's `max_chars` is not sent back.

Errors: `TemplateFailed` (`str(e)`: why, the tail of a one-line error; `e.line`: the template's line
when Jinja names one) and `TemplateRefused` (the template called `raise_exception(message)`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

TEMPLATE_CHARS = 1 << 20
"""The most characters a chat template may add to the prompt (its turns and markers)."""

TEMPLATE_BITS = 1 << 16
"""The most bits an integer a chat template computes with `**` or `*` may have (a power is one C call,
which no time limit inside the process can interrupt: `3 ** 300000000` ran for minutes)."""

TEMPLATE_BYTES = 1 << 30
"""The address space the rendering child may use (`RLIMIT_AS`): past it, the template runs out of memory."""


class TemplateFailed(Exception):
    """The template failed: `str(e)` says why (one line), `line` is its line when Jinja names one ("")."""

    def __init__(self, why: str, line: str = ""):
        super().__init__(why)
        self.line = line


class TemplateRefused(Exception):
    """The template called `raise_exception(message)`: `str(e)` is its message."""


def render(template: str, *, seconds: float, prompt_chars: int, **context) -> str:
    """`template` rendered with `context` (JSON values: `messages`, `bos_token`, ...) in a child process
    killed after `seconds` (see the module docstring); a rendering of more than `TEMPLATE_CHARS` plus
    four times `prompt_chars` characters fails.

    Raises: TemplateFailed, TemplateRefused."""
    request = json.dumps({"template": template, "context": context, "prompt_chars": prompt_chars})
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = "import sys; sys.path.insert(0, sys.argv[1]); from fwdshim.frontend.chat_template import _child; _child()"
    try:
        out = subprocess.run([sys.executable, "-I", "-c", code, root], input=request, capture_output=True,
                             text=True, encoding="ascii", timeout=seconds)  # fmt: skip
    except subprocess.TimeoutExpired:  # killed (SIGKILL) by subprocess.run
        raise TemplateFailed(f"it runs past {seconds} s") from None
    try:
        reply = json.loads(out.stdout)
    except ValueError:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise TemplateFailed(f"its rendering process ended with status {out.returncode} ({last})") from None
    if "text" in reply:
        return reply["text"]
    if reply.get("refused") is not None:
        raise TemplateRefused(reply["refused"])
    raise TemplateFailed(reply["why"], reply.get("line", ""))


def _child() -> None:
    """The rendering process: a request on stdin, one JSON reply on stdout (ASCII)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = TEMPLATE_BYTES if hard == resource.RLIM_INFINITY else min(TEMPLATE_BYTES, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, ValueError, OSError):  # no such limit here: the time limit still holds
        pass
    request = json.loads(sys.stdin.read())
    sys.stdout.write(json.dumps(_render_here(request["template"], request["context"], request["prompt_chars"])))


def _render_here(template: str, context: dict, prompt_chars: int) -> dict:
    """`{"text": ...}`, `{"refused": message}` or `{"why": ..., "line": ...}`."""
    from jinja2 import TemplateError

    class Refused(Exception):
        pass

    def raise_exception(message):
        raise Refused(str(message))

    env = _bounded_environment()(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    try:
        text = env.from_string(template).render(**context)
    except Refused as e:
        return {"refused": str(e)}
    except TemplateError as e:  # a template that does not parse, or reads what is not there
        return {"why": str(e).rstrip("."), "line": f" line {e.lineno}" if getattr(e, "lineno", None) else ""}
    except _TooLarge as e:
        return {"why": str(e)}
    except RecursionError:
        return {"why": "it recurses too deep"}
    except MemoryError:
        return {"why": "it runs out of memory"}
    except Exception as e:  # noqa: BLE001 - the template's own Python errors (1/0, range(10**9), ...)
        return {"why": f"{type(e).__name__}: {str(e).rstrip('.')}"}
    if len(text) > TEMPLATE_CHARS + 4 * prompt_chars:
        return {"why": f"it renders {len(text)} characters for a prompt of {prompt_chars}"}
    return {"text": text}


class _TooLarge(Exception):
    """A template's `**` or `*` whose result would pass `TEMPLATE_BITS` or `TEMPLATE_CHARS`; `str(e)`
    says which (the tail of the one-line error)."""


def _bounded_binop(operator: str, left, right) -> None:
    """Raise `_TooLarge` before `left ** right` or `left * right` is computed when the result would be
    an integer of more than `TEMPLATE_BITS` bits or a sequence of more than `TEMPLATE_CHARS` items."""
    ints = [isinstance(v, int) for v in (left, right)]  # bool is an int too
    if operator == "**" and all(ints) and right > 0 and abs(left) > 1:
        bits = right * (abs(left).bit_length() - 1)  # the result has at least this many bits
        if bits > TEMPLATE_BITS:
            raise _TooLarge(f"it computes {_short(left)} ** {_short(right)}, an integer of more than "
                            f"{TEMPLATE_BITS} bits")  # fmt: skip
    if operator == "*":
        if all(ints) and left.bit_length() + right.bit_length() > TEMPLATE_BITS + 1:
            raise _TooLarge(f"it computes a product of more than {TEMPLATE_BITS} bits")
        for seq, n in ((left, right), (right, left)):
            if isinstance(n, int) and isinstance(seq, (str, bytes, list, tuple)) and len(seq) * n > TEMPLATE_CHARS:
                raise _TooLarge(f"it repeats a {type(seq).__name__} of {len(seq)} items {_short(n)} times, "
                                f"past {TEMPLATE_CHARS} items")  # fmt: skip


def _short(n: int) -> str:
    """An integer as the template wrote it when short, else its size (printing a huge one is slow too)."""
    return str(n) if n.bit_length() <= 64 else f"an integer of {n.bit_length()} bits"


def _bounded_environment() -> type:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Bounded(ImmutableSandboxedEnvironment):
        """Jinja's immutable sandbox with `**` and `*` bounded (`_bounded_binop`); Jinja then does not
        fold these operators at compile time either (a constant power hung `from_string`)."""

        intercepted_binops = frozenset({"**", "*"})

        def call_binop(self, context, operator, left, right):
            _bounded_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

    return Bounded

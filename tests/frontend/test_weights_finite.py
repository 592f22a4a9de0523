"""Non-finite weights are refused when a file's weight is first read (`weights.first_nonfinite`,
`frontend.gguf_model.check_finite`): an inf or NaN block scale or float value names the file, the
tensor, the row and the block or value.

The fault, by kind: the kernels scale each block's integer dot by the block's scale, the executor
dequantizes each value first, so an inf scale gave inf on the GPU and NaN on the CPU (inf * 0 for a zero
quant): a MoE router then ranked that expert first on one and last on the other, and with one such
router row a CPU run was silently finite. `SCALE_FIELDS` (the f16 scales' offsets in each GGML block)
is checked against gguf's own dequantizer, an independent reading of `ggml-common.h`."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from support.seeds import rng

from fwdshim.frontend.export import byte_vocab, random_llama, write_llama
from fwdshim.frontend.gguf_model import GGUFWeights, LlamaParams, ModelError
from fwdshim.frontend.importer import import_gguf
from fwdshim.tools import cli
from fwdshim.weights import SCALE_FIELDS, DictWeights, NonFiniteWeight, first_nonfinite

F16_NAN = np.frombuffer(np.float16(np.nan).tobytes(), np.uint8)


@pytest.mark.parametrize("qtype", sorted(SCALE_FIELDS, key=lambda q: q.name), ids=lambda q: q.name)
def test_scale_fields_are_the_bytes_gguf_scales_by(qtype):
    """A NaN written at each 2-byte position of a block makes gguf's dequantized block non-finite exactly
    at `SCALE_FIELDS[qtype]`, and `first_nonfinite` finds exactly those (the block, and its scale)."""
    size = gguf.GGML_QUANT_SIZES[qtype][1]
    raw = rng().integers(0, 256, (4, size), dtype=np.uint8)
    for at in SCALE_FIELDS[qtype]:
        raw[:, at : at + 2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    assert np.isfinite(gguf.quants.dequantize(raw, qtype)).all() and first_nonfinite(raw, qtype) is None
    gguf_says, ours = [], []
    for at in range(size - 1):
        r = raw.copy()
        r[2, at : at + 2] = F16_NAN
        with np.errstate(all="ignore"):
            if not np.isfinite(gguf.quants.dequantize(r, qtype)).all():
                gguf_says.append(at)
        found = first_nonfinite(r, qtype)
        if found is not None:
            assert found[0] == 2 and np.isnan(found[1]) and found[2] == SCALE_FIELDS[qtype].index(at)
            ours.append(at)
    assert gguf_says == ours == list(SCALE_FIELDS[qtype])


def test_float_values_and_bf16():
    a = rng().standard_normal((3, 40)).astype(np.float32)
    assert first_nonfinite(a, QT.F32) is None and first_nonfinite(a.astype(np.float16), QT.F16) is None
    a[2, 7] = -np.inf
    assert first_nonfinite(a, QT.F32) == (87, -np.inf, 0)
    assert first_nonfinite(a.astype(np.float16), QT.F16) == (87, -np.inf, 0)
    a[1, 3] = np.nan
    i, v, _ = first_nonfinite(a, QT.F32)
    assert i == 43 and np.isnan(v)
    bf16 = (a.view(np.uint32) >> 16).astype(np.uint16)  # truncated: inf and NaN stay what they are
    i, v, _ = first_nonfinite(bf16, QT.BF16)
    assert i == 43 and np.isnan(v)
    assert first_nonfinite(bf16.view(np.uint8), QT.BF16)[0] == 43  # gguf's reader may give the bytes
    big = np.array([3.3e38, -3.3e38], np.float32)  # the largest bf16 exponents below inf: finite
    assert first_nonfinite((big.view(np.uint32) >> 16).astype(np.uint16), QT.BF16) is None


MOE = LlamaParams(n_layer=1, d=64, ff=64, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                  vocab=258, n_expert=4, top_k=2, context_length=64)  # fmt: skip


@pytest.fixture(scope="module")
def moe_inf(tmp_path_factory):
    """A MoE file whose router row 2 has a +inf block scale (its block 1)."""
    tmp = tmp_path_factory.mktemp("moe")
    path = write_llama(tmp / "moe.gguf", MOE, random_llama(MOE, seed=4), vocab=byte_vocab([("a", "b")]))
    info = next(t for t in gguf.GGUFReader(path).tensors if t.name == "blk.0.ffn_gate_inp.weight")
    assert info.tensor_type == QT.Q8_0
    data = bytearray(path.read_bytes())
    at = info.data_offset + (2 * (MOE.d // 32) + 1) * 34
    data[at : at + 2] = np.float16(np.inf).tobytes()
    bad = tmp / "moe_inf.gguf"
    bad.write_bytes(bytes(data))
    return bad


WHY = ("tensor `blk.0.ffn_gate_inp.weight` (Q8_0 4x64): block 1 of row 2 has a scale of inf; a quantizer "
       "writes finite scales, so the file is corrupt")  # fmt: skip


def test_an_inf_router_scale_is_refused_by_the_store(moe_inf):
    with pytest.raises(ModelError) as e:
        GGUFWeights(str(moe_inf)).get("blk.0.ffn_gate_inp.weight")
    assert str(e.value) == f"{moe_inf}: {WHY}"
    model = import_gguf(moe_inf, context=16)  # the IR needs no weight's values
    with pytest.raises(ModelError) as e:
        model.weights.get("blk.0.ffn_gate_inp.weight")
    assert str(e.value) == f"{moe_inf}: {WHY}"
    assert model.weights.get("blk.0.ffn_gate_exps.weight").shape == (4, 64, 64)  # the others read as before


def test_an_inf_router_scale_stops_a_run_in_one_line(moe_inf, tmp_path, capsys, monkeypatch):
    """It ran: the CPU executor's router logit NaN (ranked last), the GPU's inf (ranked first)."""
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    rc = cli.main(["run", "--model", str(moe_inf), "--prompt", "ab", "--device", "cpu", "--max-tokens", "2"])
    out, err = capsys.readouterr()
    assert (rc, out, err) == (1, "", f"fwdshim: error: {moe_inf}: {WHY}\n")


# ---------------------------------------------------------------------------------------------
# a dense model: the rows the file holds, the file the user named, the import that converts


DENSE = LlamaParams(n_layer=1, d=64, ff=96, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                    vocab=258, context_length=64)  # fmt: skip


def corrupt(tmp, name: str, tensor: str, at: int, value: bytes, **kw):
    """A fresh dense model (`write_llama`'s `kw`) with `value` written `at` bytes into `tensor`'s data."""
    path = write_llama(tmp / f"{name}.src.gguf", DENSE, random_llama(DENSE, seed=5), vocab=byte_vocab([("a", "b")]), **kw)
    info = next(t for t in gguf.GGUFReader(path).tensors if t.name == tensor)
    data = bytearray(path.read_bytes())
    data[info.data_offset + at : info.data_offset + at + len(value)] = value
    bad = tmp / f"{name}.gguf"
    bad.write_bytes(bytes(data))
    return bad


def run_error(capsys, path, *extra) -> str:
    rc = cli.main(["run", "--model", str(path), "--prompt", "ab", "--device", "cpu", "--max-tokens", "2", *extra])
    out, err = capsys.readouterr()
    assert rc == 1 and out == "" and err.count("\n") == 1, (rc, out, err)
    return err


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("tensor,heads", [("blk.0.attn_q.weight", 4), ("blk.0.attn_k.weight", 2)])
def test_a_q_or_k_row_is_named_as_the_file_holds_it(tmp_path, capsys, cache, tensor, heads):
    """The store un-permutes Q/K rows (`unpermute_rows`): row 3 of the file is row 9 of its halves
    order (heads of 16 rows). The error named row 9: it names the file's."""
    n = 16 * heads
    bad = corrupt(tmp_path, "qk", tensor, (3 * 2 + 1) * 34, np.float16(np.inf).tobytes())
    err = run_error(capsys, bad)
    assert err == (f"fwdshim: error: {bad}: tensor `{tensor}` ({'Q8_0'} {n}x64): block 1 of row 3 has a scale of inf; "
                   "a quantizer writes finite scales, so the file is corrupt\n")  # fmt: skip


def test_a_converted_models_error_names_the_users_file_and_import_refuses_it(tmp_path, capsys, cache):
    """An F16 norm is converted to F32 into a sidecar in the cache: the NaN was named in the sidecar, and
    `import` copied it there. The conversion reads every tensor, so import refuses, naming the file given;
    so does run, the same line (a verbatim-copied tensor's rows are the file's)."""
    why = "tensor `blk.0.attn_norm.weight` (F16 64): value 5 is nan; a model's values are finite, so the file is corrupt"
    bad = corrupt(tmp_path, "f16nan", "blk.0.attn_norm.weight", 2 * 5, np.float16(np.nan).tobytes(),
                  types={"blk.0.attn_norm.weight": QT.F16})  # fmt: skip
    assert run_error(capsys, bad) == f"fwdshim: error: {bad}: {why}\n"
    assert cli.main(["import", str(bad), "-o", str(tmp_path / "s.mlir")]) == 1
    assert capsys.readouterr().err == f"fwdshim: error: {bad}: {why}\n"
    assert not list((tmp_path / "cache").rglob("*.gguf")), "no sidecar holds it"
    why = ("tensor `blk.0.ffn_down.weight` (Q8_0 64x96): block 0 of row 2 has a scale of -inf; a quantizer writes "
           "finite scales, so the file is corrupt")  # fmt: skip
    copied = corrupt(tmp_path, "copied", "blk.0.ffn_down.weight", 2 * 3 * 34, np.float16(-np.inf).tobytes(),
                     types={"blk.0.attn_norm.weight": QT.F16})  # a conversion, and a tensor copied as it is  # fmt: skip
    assert run_error(capsys, copied) == f"fwdshim: error: {copied}: {why}\n"


def test_a_q4_1_min_is_named_as_a_min(tmp_path, capsys, cache):
    """Q4_1's second f16 is its min `m`: refused as one, at run and when `--requantize q8_0` converts it
    (which said "holds inf, which Q8_0 cannot hold", naming no row)."""
    bad = corrupt(tmp_path, "q41", "blk.0.ffn_up.weight", 20 * 4 + 2, np.float16(np.inf).tobytes(),
                  types={"blk.0.ffn_up.weight": QT.Q4_1})  # rows of 64 values: 2 blocks of 20 bytes  # fmt: skip
    why = ("tensor `blk.0.ffn_up.weight` (Q4_1 96x64): block 0 of row 2 has a min of inf; a quantizer writes finite "
           "scales and mins, so the file is corrupt")  # fmt: skip
    assert run_error(capsys, bad) == f"fwdshim: error: {bad}: {why}\n"
    assert run_error(capsys, bad, "--requantize", "q8_0") == f"fwdshim: error: {bad}: {why}\n"


def test_dict_weights_refuse_a_non_finite_weight_on_its_first_read():
    """The API's store (`DictWeights`) holds to the same rule as the file stores: a weight given as a
    float array with an inf or NaN value, or as Q8_0 blocks with a non-finite scale, is refused with
    `NonFiniteWeight` (a ValueError) naming the tensor, the row and the block or value when first read;
    a finite weight beside it reads as given."""
    g = rng()
    good = g.standard_normal((4, 64)).astype(np.float32)
    bad = good.copy()
    bad[3, 5] = np.nan
    q8 = gguf.quants.quantize(g.standard_normal((6, 96)).astype(np.float32), QT.Q8_0)
    q8[4, 34 * 2 : 34 * 2 + 2] = np.frombuffer(np.float16(np.inf).tobytes(), np.uint8)  # row 4, block 2's scale
    store = DictWeights({"good": good, "bad": bad, "bad16": bad.astype(np.float16), "q": (q8, QT.Q8_0)})
    np.testing.assert_array_equal(store.get("good").raw, good)
    with pytest.raises(NonFiniteWeight, match=r"^tensor `bad` \(F32 4x64\): value 5 of row 3 is nan; a model's values are finite, so the weight is corrupt$"):
        store.get("bad")
    with pytest.raises(NonFiniteWeight, match=r"^tensor `bad16` \(F16 4x64\): value 5 of row 3 is nan"):
        store.get("bad16")
    with pytest.raises(ValueError, match=r"^tensor `q` \(Q8_0 6x96\): block 2 of row 4 has a scale of inf; a quantizer writes finite scales, so the weight is corrupt$"):
        store.get("q")
    with pytest.raises(NonFiniteWeight):  # refused again, not remembered as read
        store.get("bad")

"""The shared rule table and a shim's positions: the shared order, the forward's order, Before/After."""

from __future__ import annotations

import pytest

from fwdshim.classes import ClassId, Q8MatKind
from fwdshim.passes import rules
from fwdshim.passes.rules import RULES, compose, rule_named
from fwdshim.shim.forward import ForwardShim
from fwdshim.shim.protocol import Position

SHARED = ("norm_weight add_norm add_norm_quant norm_quant attn_output_quant glu_act_mul merged_gate_up "
          "qk_norm_rope relu_sqr elementwise_regions elementwise_chains").split()  # fmt: skip
FORWARD = ("norm_weight elementwise_regions elementwise_chains add_norm add_norm_quant norm_quant "
           "attn_output_quant glu_act_mul merged_gate_up qk_norm_rope relu_sqr").split()  # fmt: skip


def names(rules) -> list[str]:
    return [r.name for r in rules]


def test_shared_order_and_builds():
    assert names(RULES) == SHARED
    for r in RULES:
        assert r.apply is getattr(rules, r.name), "each rule matches by the function of its own name"
        assert r.builds == (ClassId(r.name),), "each rule builds the class of its own name"


def test_no_positions_is_the_shared_order():
    assert names(compose([])) == SHARED


@pytest.mark.parametrize("kind", list(Q8MatKind))
def test_forward_positions(kind):
    """The seed's rules(): regions then chains before add_norm; every rule runs once."""
    order = names(compose(ForwardShim(kind).rules()))
    assert order == FORWARD
    assert sorted(order) == sorted(SHARED)


def test_before_and_after_keep_their_order():
    positions = [
        (Position.AFTER("norm_weight"), "relu_sqr"),
        (Position.AFTER("norm_weight"), "qk_norm_rope"),
        (Position.BEFORE("norm_weight"), "elementwise_chains"),
        (Position.BEFORE("norm_weight"), "elementwise_regions"),
    ]
    order = names(compose(positions))
    assert order[:5] == ["elementwise_chains", "elementwise_regions", "norm_weight", "relu_sqr", "qk_norm_rope"]
    assert order[5:] == [n for n in SHARED if n not in order[:5]]


def test_a_position_may_name_a_chip_rule():
    rule = rule_named("elementwise_chains")
    assert names(compose([(Position.BEFORE("norm_weight"), rule)]))[0] == "elementwise_chains"


@pytest.mark.parametrize(
    "positions, message",
    [
        ([(Position.BEFORE("add_norm"), "no_such_rule")], "runs no rule `no_such_rule`"),
        ([(Position.BEFORE("no_anchor"), "relu_sqr")], "placed before `no_anchor`"),
        ([(Position.BEFORE("add_norm"), "relu_sqr"), (Position.AFTER("norm_weight"), "relu_sqr")], "twice"),
        ([(Position.BEFORE("relu_sqr"), "relu_sqr")], "placed before `relu_sqr`"),
    ],
)
def test_bad_positions(positions, message):
    with pytest.raises(ValueError, match=message):
        compose(positions)

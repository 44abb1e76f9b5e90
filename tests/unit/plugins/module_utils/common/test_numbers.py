"""Numbers from users: finite and within bounds, or refused naming the value."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import numbers
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import p2p_plan

RANGES = {"timeout_s": (0.0, 60.0, True), "slo_ms": (0.0, 1000.0, False)}


def test_set_options_become_floats_and_unset_ones_stay_unset():
    params = numbers.finite_options({"timeout_s": "2.5", "slo_ms": None}, RANGES)
    assert params == {"timeout_s": 2.5, "slo_ms": None}


@pytest.mark.parametrize("params, text", [
    ({"timeout_s": 0}, "timeout_s=0 is out of range: give a finite number greater than 0 and at most 60"),
    ({"timeout_s": "nan"}, "timeout_s='nan' is not a finite number: give a finite number greater than 0 and at most 60"),
    ({"slo_ms": True}, "slo_ms=True is not a number: give a finite number from 0 to 1000"),
])
def test_the_first_bad_option_is_named(params, text):
    with pytest.raises(numbers.NumberError) as exc:
        numbers.finite_options(params, RANGES)
    assert str(exc.value) == text


def test_required_options_refuse_none():
    with pytest.raises(numbers.NumberError) as exc:
        numbers.finite_options({"timeout_s": None, "slo_ms": 1}, RANGES, optional=False)
    assert str(exc.value) == "timeout_s=None is not a number: give a finite number greater than 0 and at most 60"


def test_the_p2p_check_still_raises_its_plan_error():
    with pytest.raises(p2p_plan.PlanError):
        p2p_plan.finite_number("x", float("inf"), 0, 1)

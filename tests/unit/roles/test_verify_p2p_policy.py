"""The verify role's P2P floors and no-peer-access policy: variables, argument spec, task."""

import os

import yaml

from ansible_collections.gpufleet.tuning.plugins.module_utils import p2p_bandwidth
from ansible_collections.gpufleet.tuning.tests.unit.helpers import role_base_defaults

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "verify")


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as handle:
        return yaml.safe_load(handle)


def test_the_new_variables_have_defaults_and_specs_that_agree():
    defaults = role_base_defaults(os.path.dirname(os.path.dirname(ROLE)), "verify")
    options = load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    expected = {"verify_p2p_no_peer_access": "fail", "verify_p2p_link_floors": True,
                "verify_p2p_floor_efficiency": {}, "verify_p2p_min_unidirectional_gbps": None,
                "verify_p2p_min_bidirectional_gbps": None}
    for name, value in expected.items():
        assert defaults[name] == value, name
        assert options[name].get("default") == value, name
    assert options["verify_p2p_no_peer_access"]["choices"] == list(p2p_bandwidth.NO_PEER_ACCESS)
    assert p2p_bandwidth.ARGUMENT_SPEC["no_peer_access"]["choices"] == list(p2p_bandwidth.NO_PEER_ACCESS)


def test_the_task_passes_the_policy_and_floors_to_the_module():
    tasks = load("tasks", "p2p_bandwidth.yml")
    args = [t for t in tasks if "gpufleet.tuning.p2p_bandwidth" in t][0]["gpufleet.tuning.p2p_bandwidth"]
    assert args["no_peer_access"] == "{{ verify_p2p_no_peer_access }}"
    assert args["link_floors"] == "{{ verify_p2p_link_floors }}"
    assert "verify_p2p_floor_efficiency" in args["floor_efficiency"]
    assert any("staged_pairs" in str(t.get("when")) for t in tasks)


def test_the_report_keeps_the_staged_pairs():
    report = load("tasks", "report.yml")
    judge = report[0]["block"][0]
    assert judge["ansible.builtin.set_fact"]["verify_report"] == "{{ __verify_judged }}"
    assert "staged_pairs" in judge["vars"]["__verify_judged"]["p2p_staged"]

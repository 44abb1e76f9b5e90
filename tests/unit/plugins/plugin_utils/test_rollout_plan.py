"""gpufleet.tuning.rollout_plan: the canary batch first, then batches of serial hosts."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.rollout_plan import rollout_plan

HOSTS = ["h1", "h2", "h3", "h4", "h5", "h6"]


def test_canary_then_batches_of_serial():
    plan = rollout_plan(HOSTS, 1, 2)
    assert plan["batches"] == [["h1"], ["h2", "h3"], ["h4", "h5"], ["h6"]]
    assert plan["serial"] == [1, 2] and plan["order"] == HOSTS and plan["canary"] == ["h1"]


def test_named_canary_hosts_go_first_in_the_given_order():
    plan = rollout_plan(HOSTS, 1, "2", ["h4", "h2"])
    assert plan["order"] == ["h4", "h2", "h1", "h3", "h5", "h6"]
    assert plan["batches"] == [["h4", "h2"], ["h1", "h3"], ["h5", "h6"]] and plan["serial"] == [2, 2]


@pytest.mark.parametrize("serial, size", [("50%", 3), ("10%", 1), ("100%", 6), (" 34 % ", 2), (4, 4)])
def test_serial_as_ansible_takes_it(serial, size):
    assert rollout_plan(HOSTS, 1, serial)["serial"] == [1, size]


@pytest.mark.parametrize("args, words", [
    ((0, 2), "gpufleet_canary=0"),
    ((True, 2), "gpufleet_canary=True"),
    ((1, "0"), "serial='0'"),
    ((1, "150%"), "serial='150%'"),
    ((1, "fast"), "serial='fast'"),
    ((1, 2, ["h9"]), "names h9"),
])
def test_bad_values_are_named(args, words):
    with pytest.raises(AnsibleFilterError) as exc:
        rollout_plan(HOSTS, *args)
    assert words in str(exc.value)


def test_duplicates_and_a_single_host():
    assert rollout_plan(["a", "a"], 1, 5)["batches"] == [["a"]]
    assert rollout_plan([], 1, 1)["batches"] == []

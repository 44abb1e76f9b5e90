"""The audit's fixture nodes, loaded the way the audit role puts them together.

tests/unit/fixtures/audit/NAME.yml holds a node's facts (as gpufleet.tuning.node_facts returns
them, docs/facts.md) and the check-mode results of the host role's tasks. ``audit(NAME)`` runs
what roles/audit/tasks/report.yml runs: audit_planned on the results, audit_rules with the
shipped rules and the host role's own defaults as params, and the host, time, plan and facts
beside the evaluation: the dict the role writes to audit.json.
"""

import copy
import os

import yaml

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_planned import audit_planned
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import audit_rules
from ansible_collections.gpufleet.tuning.tests.unit.helpers import role_base_defaults

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(REPO, "tests", "unit", "fixtures", "audit")
RULES_FILE = os.path.join(REPO, "roles", "audit", "files", "rules.yml")
NODES = ("untuned", "tuned", "blackwell-pcie", "h200-nvlink")


def load_yaml(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def rules():
    return load_yaml(RULES_FILE)


def fixture(name):
    return load_yaml(os.path.join(FIXTURES, name + ".yml"))


def host_defaults():
    """The host role's defaults, as the base profile gives them."""
    return role_base_defaults(REPO, "host")


def params():
    """roles/audit/vars/main/main.yml __audit_host_params, with the host role's defaults."""
    host = host_defaults()
    return {
        "sysctl": dict(host["host_sysctl_settings"], **host["host_sysctl_extra"]),
        "pcie_size": host["host_pcie_size"],
        "cpu_max_idle_latency_us": host["host_cpu_power_max_idle_latency_us"],
        "cpu_governor": host["host_cpu_power_governor"],
        "cpu_epp": host["host_cpu_power_energy_performance_preference"],
        "lxc_memlock_limit": host["host_lxc_memlock_limit"],
        "health": health_params(),
    }


def health_params():
    """roles/audit/vars/main/main.yml __audit_health_params.health with nothing from the inventory:
    the shipped thresholds and XID catalog, no expected GPU or NVLink count."""
    audit_vars = load_yaml(os.path.join(REPO, "roles", "audit", "vars", "main", "main.yml"))
    codes = load_yaml(os.path.join(REPO, "roles", "audit", "vars", "main", "xid_codes.yml"))["__audit_xid_codes"]
    return dict(audit_vars["__audit_health_threshold_defaults"], xid_codes=codes, expected_gpus=None,
                expected_nvlinks=None)


def evaluate(facts, plan=None, extra=None, disabled=None, rule_list=None, extra_params=None):
    merged = params()
    merged.update(extra_params or {})
    return audit_rules(copy.deepcopy(facts), rules() if rule_list is None else rule_list, extra=extra or [],
                       disabled=disabled or [], params=merged, plan=plan or {})


def audit(name):
    """The host's audit for fixture NAME, as the audit role builds it."""
    data = fixture(name)
    plan = audit_planned(data["results"])
    result = evaluate(data["facts"], plan)
    result.update(host=data["host"], time=data["time"], planned=plan, facts=data["facts"])
    return result


def found(result, key="findings"):
    """{(rule, item)} of one of the evaluation's lists."""
    return set((entry["rule"], entry["item"]) for entry in result[key])

"""The layout of the collection's Python: which plugin type may import which.

- plugins/plugin_utils/ is the controller-side code shared by plugins: it imports no action or
  filter plugin (the plugins import it, never the other way round);
- an action plugin imports no other action plugin (what two actions share is in plugin_utils);
- plugins/module_utils/ is what modules take to the node: it imports nothing from plugin_utils,
  action or filter, and neither do the modules;
- plugins/filter/ holds exactly five files of filters, grouped by area (audit, experiments, rollout, report,
  changes), each a FilterModule over plugin_utils, and one sidecar plugins/filter/NAME.yml with
  the documentation of each filter it returns: ansible-doc finds a filter's documentation by
  its name, and a sidecar without its filter documents nothing.

The first tests feed the checker small sources that break each rule, so a checker that stopped
seeing them fails too.
"""

from __future__ import annotations

import ast
import importlib
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLUGINS = os.path.join(REPO, "plugins")
FILTER = os.path.join(PLUGINS, "filter")
COLLECTION = "ansible_collections.gpufleet.tuning"
PACKAGE = COLLECTION + ".plugins"
FILTER_FILES = ("audit.py", "changes.py", "experiments.py", "health.py", "profile.py", "report.py", "rollout.py")

# Folder under plugins/ -> the packages of this collection its files must not import.
FORBIDDEN = {
    "module_utils": ("plugin_utils", "action", "filter"),
    "modules": ("plugin_utils", "action", "filter"),
    "plugin_utils": ("action", "filter", "lookup"),
    "lookup": ("action", "filter", "lookup"),
}


def _module_name(path):
    """The dotted name of the plugins file ``path`` (a package's ``__init__`` kept, so that its
    relative imports resolve against the package itself)."""
    rel = os.path.relpath(path, REPO)[:-len(".py")].split(os.sep)
    return ".".join([COLLECTION] + rel)


def imported(source, module):
    """Every module ``source`` (the code of dotted ``module``) may import, as (line, dotted
    name): for ``from A import B`` both A and A.B, since B may be a module; relative imports
    resolved against ``module``'s package."""
    found = []
    package = module.split(".")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            found.extend((node.lineno, "%s.%s" % (name, alias.name)) for alias in node.names if alias.name != "*")
    return found


def _inside(name, package):
    return name == package or name.startswith(package + ".")


def offences(source, module):
    """Each import of ``module``'s source that breaks the layout, as 'module:line: what'."""
    found = []
    parts = module[len(PACKAGE) + 1:].split(".") if _inside(module, PACKAGE) else []
    folder = parts[0] if parts else None
    for line, name in imported(source, module):
        if not _inside(name, PACKAGE):
            continue
        for kind in FORBIDDEN.get(folder, ()):
            if _inside(name, "%s.%s" % (PACKAGE, kind)):
                found.append("%s:%d: plugins/%s imports %s (a %s plugin)" % (module, line, folder, name, kind))
        if folder == "action" and _inside(name, PACKAGE + ".action") and name != module:
            found.append("%s:%d: an action plugin imports another action plugin, %s (share it through "
                         "plugin_utils)" % (module, line, name))
    return sorted(set(found))


def _python_files(folder):
    for root, _dirs, files in os.walk(os.path.join(PLUGINS, folder)):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(root, name)


def _layout_offences():
    found = []
    for folder in ("plugin_utils", "action", "module_utils", "modules", "filter", "lookup"):
        for path in _python_files(folder):
            with open(path, encoding="utf-8") as handle:
                found.extend(offences(handle.read(), _module_name(path)))
    return found


# ------------------------------------------------------------------------------ the checker

@pytest.mark.parametrize("module, source", [
    (PACKAGE + ".plugin_utils.x", "from ansible_collections.gpufleet.tuning.plugins.filter.audit import FilterModule\n"),
    (PACKAGE + ".plugin_utils.x", "from ansible_collections.gpufleet.tuning.plugins.filter import audit\n"),
    (PACKAGE + ".plugin_utils.x", "import ansible_collections.gpufleet.tuning.plugins.action.audit_judge\n"),
    (PACKAGE + ".plugin_utils.x", "from ansible_collections.gpufleet.tuning.plugins import action\n"),
    (PACKAGE + ".plugin_utils.report.x", "from ...filter import audit\n"),
    (PACKAGE + ".plugin_utils.x", "def f():\n    from ansible_collections.gpufleet.tuning.plugins.filter import report\n"),
    (PACKAGE + ".action.audit_judge", "from ansible_collections.gpufleet.tuning.plugins.action import artifact_files\n"),
    (PACKAGE + ".action.audit_judge", "from .artifact_files import write\n"),
    (PACKAGE + ".module_utils.x", "from ansible_collections.gpufleet.tuning.plugins.plugin_utils import changes\n"),
    (PACKAGE + ".module_utils.common.x", "from ..report import page\nfrom ...plugin_utils.report import page\n"),
    (PACKAGE + ".module_utils.x", "from ansible_collections.gpufleet.tuning.plugins.filter.changes import FilterModule\n"),
    (PACKAGE + ".modules.x", "from ansible_collections.gpufleet.tuning.plugins.plugin_utils.artifact_dir import encode\n"),
])
def test_the_checker_sees_a_forbidden_import(module, source):
    assert offences(source, module)


@pytest.mark.parametrize("module, source", [
    (PACKAGE + ".plugin_utils.x", "from ansible_collections.gpufleet.tuning.plugins.plugin_utils import changes\n"
                                  "from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records\n"),
    (PACKAGE + ".action.audit_judge", "from ansible.plugins.action import ActionBase\n"
                                      "from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_files\n"),
    (PACKAGE + ".filter.audit", "from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import audit_rules\n"),
    (PACKAGE + ".module_utils.x", "from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops\n"),
])
def test_the_checker_lets_an_allowed_import_pass(module, source):
    assert offences(source, module) == []


def test_no_plugin_imports_across_the_layout():
    assert _layout_offences() == []


def test_module_names_follow_the_folders():
    path = os.path.join(PLUGINS, "plugin_utils", "report", "page.py")
    assert _module_name(path) == PACKAGE + ".plugin_utils.report.page"


# ------------------------------------------------------------------------------ filters

def filter_files():
    return sorted(name for name in os.listdir(FILTER) if name.endswith(".py"))


def sidecars():
    return sorted(name[:-len(".yml")] for name in os.listdir(FILTER) if name.endswith(".yml"))


def exported(name):
    """{filter name: function} of plugins/filter/``name``."""
    module = importlib.import_module("%s.filter.%s" % (PACKAGE, name[:-len(".py")]))
    return module.FilterModule().filters()


def literal_names(name):
    """The keys of the dict literal FilterModule.filters returns, read as scripts/stages/collection
    reads them to render every filter's documentation."""
    with open(os.path.join(FILTER, name), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "filters":
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Dict):
                    found.extend(k.value for k in ret.value.keys if isinstance(k, ast.Constant))
    return sorted(found)


def test_the_filter_folder_holds_the_five_files_by_area():
    assert filter_files() == sorted(FILTER_FILES)


@pytest.mark.parametrize("name", FILTER_FILES)
def test_each_filter_file_is_a_thin_wrapper_over_plugin_utils(name):
    filters = exported(name)
    assert filters
    for filter_name, function in filters.items():
        assert _inside(function.__module__, PACKAGE + ".plugin_utils"), (filter_name, function.__module__)
        assert function.__name__ == filter_name
    assert literal_names(name) == sorted(filters)


def test_no_filter_name_is_returned_twice():
    names = [filter_name for name in filter_files() for filter_name in exported(name)]
    assert sorted(names) == sorted(set(names))


def test_every_filter_has_its_sidecar_and_every_sidecar_its_filter():
    names = set(filter_name for name in filter_files() for filter_name in exported(name))
    assert sorted(names - set(sidecars())) == [], "filters without plugins/filter/NAME.yml"
    assert sorted(set(sidecars()) - names) == [], "sidecars naming no filter"


@pytest.mark.parametrize("name", sidecars())
def test_each_sidecar_documents_its_filter(name):
    with open(os.path.join(FILTER, name + ".yml"), encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)
    assert sorted(doc) == ["DOCUMENTATION", "EXAMPLES", "RETURN"]
    assert doc["DOCUMENTATION"]["name"] == name
    assert doc["DOCUMENTATION"]["short_description"]
    assert "gpufleet.tuning.%s" % name in doc["EXAMPLES"]
    assert "_value" in doc["RETURN"]
    for stale in ("host_tuning", "__host_tuning"):
        assert stale not in yaml.safe_dump(doc)

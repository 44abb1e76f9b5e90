"""Only public ansible-core API in the collection's plugins.

ansible-core changes its internals at every release: code that reads its module packer
(ansible.executor.module_common), overrides private ActionBase methods (_configure_module,
_low_level_execute_command, ...), reads its AnsiballZ cache folder or unpickles anything is
code that breaks on the next core, and it is what the collection once used for speed (issue 35).
This test reads every Python file under plugins/ and fails naming the file and line of:

- an import of ansible.executor.module_common (or anything under ansible.executor);
- an action plugin class that defines a method ActionBase has and marks private (a leading
  underscore), i.e. overrides it;
- the text ``ansiballz_cache``;
- an import of pickle, marshal, shelve or dill, or a call of their load/loads.

The first tests feed the checker small sources that do each of these, so a checker that stopped
seeing them fails too.
"""

from __future__ import annotations

import ast
import os

import pytest

from ansible.plugins.action import ActionBase

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLUGINS = os.path.join(REPO, "plugins")
UNPICKLERS = ("pickle", "marshal", "shelve", "dill", "_pickle", "cPickle")
PRIVATE_ACTION_METHODS = frozenset(name for name in dir(ActionBase)
                                   if name.startswith("_") and not name.startswith("__") and callable(getattr(ActionBase, name)))


def _base_names(node):
    names = []
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.append(base.id)
        elif isinstance(base, ast.Attribute):
            names.append(base.attr)
    return names


def findings(source, path="<test>"):
    """Every use of ansible-core internals or unpickling in ``source``, as 'path:line: what'."""
    found = []
    if "ansiballz_cache" in source:
        line = source[:source.index("ansiballz_cache")].count("\n") + 1
        found.append("%s:%d: reads Ansible's AnsiballZ cache (ansiballz_cache)" % (path, line))
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("ansible.executor"):
                    found.append("%s:%d: imports %s" % (path, node.lineno, alias.name))
                if alias.name.split(".")[0] in UNPICKLERS:
                    found.append("%s:%d: imports %s (unpickling)" % (path, node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.startswith("ansible.executor") or (module == "ansible" and any(a.name == "executor" for a in node.names)):
                found.append("%s:%d: imports from %s" % (path, node.lineno, module))
            if module.split(".")[0] in UNPICKLERS:
                found.append("%s:%d: imports from %s (unpickling)" % (path, node.lineno, module))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "loads"):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in UNPICKLERS:
                found.append("%s:%d: unpickles (%s.%s)" % (path, node.lineno, owner.id, node.func.attr))
        elif isinstance(node, ast.ClassDef) and (node.name == "ActionModule" or set(_base_names(node)) & {"ActionBase", "ActionModule"}):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in PRIVATE_ACTION_METHODS:
                    found.append("%s:%d: overrides the private ActionBase method %s" % (path, item.lineno, item.name))
    return found


def plugin_files():
    for folder, _dirs, files in os.walk(PLUGINS):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


@pytest.mark.parametrize("source, what", [
    ("from ansible.executor import module_common\n", "imports from ansible.executor"),
    ("import ansible.executor.module_common as mc\n", "imports ansible.executor.module_common"),
    ("from ansible.executor.module_common import modify_module\n", "imports from ansible.executor.module_common"),
    ("import pickle\n", "imports pickle (unpickling)"),
    ("from pickle import loads\n", "imports from pickle (unpickling)"),
    ("import marshal\nmarshal.loads(b'')\n", "unpickles (marshal.loads)"),
    ("path = C.DEFAULT_LOCAL_TMP + '/ansiballz_cache'\n", "reads Ansible's AnsiballZ cache"),
    ("from ansible.plugins.action import ActionBase\nclass ActionModule(ActionBase):\n"
     "    def _configure_module(self, name, args, task_vars):\n        return None\n",
     "overrides the private ActionBase method _configure_module"),
    ("class ActionModule(NormalAction):\n    def _low_level_execute_command(self, cmd):\n        return None\n",
     "overrides the private ActionBase method _low_level_execute_command"),
])
def test_the_checker_sees_each_kind_of_internal_use(source, what):
    assert any(what in line for line in findings(source)), findings(source)


def test_the_checker_lets_public_api_through():
    source = ("from ansible.plugins.action import ActionBase\nclass ActionModule(ActionBase):\n"
              "    TRANSFERS_FILES = False\n    def run(self, tmp=None, task_vars=None):\n"
              "        return super().run(tmp, task_vars)\n")
    assert findings(source) == []


def test_the_private_methods_known_include_the_ones_once_overridden():
    assert {"_configure_module", "_low_level_execute_command", "_execute_module"} <= PRIVATE_ACTION_METHODS


def test_no_plugin_uses_ansible_core_internals_or_unpickles():
    found = []
    for path in plugin_files():
        with open(path, encoding="utf-8") as handle:
            found.extend(findings(handle.read(), os.path.relpath(path, REPO)))
    assert not found, "plugins use ansible-core internals or unpickle: %s" % found

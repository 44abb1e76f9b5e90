#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serving_unit
short_description: Read the command a model server's systemd unit runs, as systemd runs it
version_added: 0.3.0
description:
  - Reads the service O(name) from its unit files the way systemd merges them, and returns the
    command its C(ExecStart=) runs as a list of words, which server that is, where the server's
    own arguments start, and its long flags. Changes nothing.
  - The unit file is the first one on systemd's search path (C(/etc/systemd/system) before
    C(/run/systemd/system) before C(/usr/lib/systemd/system), an instance falling back to its
    template); its drop-ins are every C(*.conf) of C(NAME.d/), of the template's, of each dash
    prefix's (C(foo-.service.d/)) and of C(service.d/), a name in a higher directory hiding the
    same name lower, applied in file-name order.
  - The command is split as systemd splits it (quotes, C escapes, specifiers, the C(-@:+!)
    prefixes; an empty C(ExecStart=) in a drop-in resets it), then C($NAME) and C(${NAME}) are
    expanded from C(Environment=) and the C(EnvironmentFile=) files, which override it.
    Variables the service manager adds itself (C(HOME), C(MAINPID)) are not known and read as
    empty, with a warning.
  - Recognised servers are SGLang (C(python -m sglang.launch_server), C(sglang serve)), vLLM
    (C(vllm serve), C(python -m vllm.entrypoints.openai.api_server)), llama.cpp's
    C(llama-server) and llama-cpp-python (C(python -m llama_cpp.server)), from any venv path and
    behind C(env), C(numactl), C(taskset), C(nice), C(ionice), C(chrt), C(stdbuf), C(prlimit),
    C(runuser), C(conda run) or C(uv run). A command given as one shell string (C(sh -c)) or a
    container (C(docker run)) is V(generic).
  - The collection's own launch drop-in (O(dropin_name), written by
    M(gpufleet.tuning.serving_launch)) is reported apart, with the command the unit runs
    without it (RV(vendor_argv)).
  - Fails when the unit is not installed (naming the directories searched), is masked, has no
    C(ExecStart=), or runs several commands (a C(Type=oneshot) list is not a server), or when a
    required C(EnvironmentFile=) is missing.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Only reads; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Linux with systemd unit files; systemd itself need not run.
options:
  name:
    description:
      - The service, such as V(vllm.service) or V(sglang@0.service). A name without a unit type
        gets C(.service). Only ASCII letters, digits and C(:-_.\@).
    type: str
    required: true
  dropin_name:
    description:
      - File name of the collection's launch drop-in in C(/etc/systemd/system/NAME.d/).
    type: str
    default: 90-gpufleet-launch.conf
notes:
  - The result holds the command's arguments and the unit's environment as the unit files set
    them, API keys and tokens included. Set C(no_log) on the task where that matters.
seealso:
  - module: gpufleet.tuning.serving_launch
    description: Sets the launch command through the collection's drop-in.
  - module: gpufleet.tuning.serving_health
    description: Waits until the server is ready.
"""

EXAMPLES = r"""
- name: Read the serving unit's command
  gpufleet.tuning.serving_unit:
    name: vllm
  register: served

- name: Show the server and its flags
  ansible.builtin.debug:
    msg: "{{ served.kind }} {{ served.flags }} (its own arguments from word {{ served.args_start }})"
"""

# RETURN doc fragments are not supported by ansible-doc, so ``changes`` is documented with the
# same text in every module of this collection; keep the copies equal.
RETURN = r"""
changes:
  description:
    - What this run changed (in check mode, what it would change) as records for programs to
      read (the closing summary, reports, a fleet revert); C(diff) shows the same for people.
    - One record per value, file, kernel module or service; empty when nothing changed, so
      C(changed) is true exactly when this list is not empty. A module that only reads always
      returns an empty list.
    - A failed run returns no records; what it had applied was restored.
  returned: always
  type: list
  elements: dict
  contains:
    area:
      description: The part of the tuning (C(sysctl), C(pcie), C(cpu_power), C(lxc_memlock),
        C(peermem), C(nvidia_options), C(kernel_cmdline)).
      type: str
    kind:
      description: V(value), V(file), V(module) or V(service).
      type: str
    target:
      description: The key, file path, PCI address, kernel module or unit.
      type: str
    before:
      description:
        - What this run found; null when absent or unknown.
        - A value is its text. A file is C(sha256), C(size) and C(mode), never its content
          (config files can hold secrets). A kernel module is V(loaded) or V(not loaded), a
          service a state word such as V(enabled).
      type: raw
    after:
      description: What this run left (in check mode, would leave), in the form of C(before).
      type: raw
  sample: []
unit:
  description: The unit's own name (the target's when O(name) is an alias).
  returned: always
  type: str
  sample: vllm.service
fragment_path:
  description: The unit file, links followed.
  returned: always
  type: str
  sample: /etc/systemd/system/vllm.service
fragment_sha256:
  description: sha256 of the unit file.
  returned: always
  type: str
dropins:
  description: The drop-in files in the order systemd applies them, the collection's included.
  returned: always
  type: list
  elements: str
  sample: ["/etc/systemd/system/vllm.service.d/90-gpufleet-launch.conf"]
argv:
  description: The command the unit runs, one word each, the program first, C($) expanded.
  returned: always
  type: list
  elements: str
  sample: ["/opt/vllm/bin/vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000"]
argv_raw:
  description: The command before C($NAME) and C(${NAME}) expansion (specifiers resolved).
  returned: always
  type: list
  elements: str
prefix:
  description: The C(ExecStart=) prefixes (C(-), C(@), C(:), C(+), C(!), C(!!)), empty for none.
    With C(@), the second word of RV(argv) is the name the program is shown as.
  returned: always
  type: str
  sample: ""
program:
  description: The server's program behind any wrapper (C(numactl), C(env)); the first word of RV(argv) otherwise.
  returned: always
  type: str
  sample: /opt/vllm/bin/vllm
args_start:
  description: Index in RV(argv) where the server's own arguments start (after C(serve), or
    after C(-m MODULE)); flags are read and edited only from there.
  returned: always
  type: int
  sample: 2
kind:
  description: V(sglang), V(vllm), V(llama_cpp) (llama.cpp's C(llama-server)),
    V(llama_cpp_python) (C(python -m llama_cpp.server)) or V(generic).
  returned: always
  type: str
  sample: vllm
flags:
  description:
    - The server's long flags from RV(args_start), as C(--with-dashes) (C(_) and C(-) are the
      same to vLLM and SGLang), in the order they first appear, each with the value it was last
      given; V(true) for a bare boolean flag.
  returned: always
  type: dict
  sample: {"--port": "8000", "--enable-prefix-caching": true}
environment:
  description: The variables the command is expanded with (C(Environment=), then the
    C(EnvironmentFile=) files).
  returned: always
  type: dict
environment_files:
  description: The C(EnvironmentFile=) settings in order.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The file or glob.
      type: str
    optional:
      description: Whether it had the C(-) prefix (a missing file is then no error).
      type: bool
    found:
      description: Whether a file matches now.
      type: bool
command:
  description: The C(ExecStart=) text (prefixes included) that systemd splits back to
    RV(argv); null with a warning when RV(argv) cannot be written as one line.
  returned: always
  type: str
  sample: /opt/vllm/bin/vllm serve Qwen/Qwen3-8B --port 8000
collection_dropin:
  description: The collection's launch drop-in when it exists and applies, else null.
  returned: always
  type: str
  sample: /etc/systemd/system/vllm.service.d/90-gpufleet-launch.conf
collection_dropin_sha256:
  description: sha256 of RV(collection_dropin); null without it.
  returned: always
  type: str
vendor_argv:
  description: The command the unit runs without the collection's drop-in (what it runs
    without this collection); RV(argv) when there is no such drop-in, null (with a warning)
    when the unit would then run no single command.
  returned: always
  type: list
  elements: str
user:
  description: C(User=), null when unset (root).
  returned: always
  type: str
working_directory:
  description: C(WorkingDirectory=), null when unset.
  returned: always
  type: str
type:
  description: C(Type=), or systemd's default (V(simple)).
  returned: always
  type: str
  sample: simple
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_unit
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome


def main():
    module = AnsibleModule(argument_spec=serving_unit.ARGUMENT_SPEC, supports_check_mode=True)
    outcome.finish(module, lambda: serving_unit.run(module.params, check_mode=module.check_mode))


if __name__ == "__main__":
    main()

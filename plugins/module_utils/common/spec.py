# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An engine's ARGUMENT_SPEC as the one source of its options.

Each engine exports the dict AnsibleModule takes; the module passes it on, the engine's
validate() reads allowed values from it, and the tests compare it with the DOCUMENTATION.
Engines are also called directly (tests, the verify role's helpers), with only some options
given: ``with_defaults`` fills the rest from the same spec, as AnsibleModule would.
"""

from __future__ import annotations

import copy


def with_defaults(argument_spec, params):
    """``params`` with every option it leaves out at its ``argument_spec`` default."""
    full = {key: copy.deepcopy(option.get("default")) for key, option in argument_spec.items()}
    full.update(params or {})
    return full

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Numbers from users, checked before anything runs: finite, within bounds, the bad value named.

A threshold or timeout of NaN would never trip (every comparison with NaN is false) and an
infinite one disables what it bounds, so both are refused, also as text ("nan", "1e999"),
before a measurement or a request starts. Used by the P2P check (p2p/p2p_plan.py) and the
serving engines (serving_health, inference_benchmark).
"""

from __future__ import annotations

import math


class NumberError(ValueError):
    """Bad input: the message names the value and what is accepted."""


def finite_number(name, value, low, high, low_open=False):
    """``value`` (a number or its text) as a float within [low, high] (or (low, high] with
    ``low_open``); NumberError naming ``name`` and the value otherwise.

    Refused: booleans, text that is not a number, NaN, infinities (also "1e999", which float()
    turns into inf) and integers too large for a float.
    """
    if low_open:
        wanted = "a finite number greater than %g and at most %g" % (low, high)
    else:
        wanted = "a finite number from %g to %g" % (low, high)
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:20] + "..." + shown[-8:]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise NumberError("%s=%s is not a number: give %s" % (name, shown, wanted))
    try:
        number = float(value)
    except ValueError:
        raise NumberError("%s=%s is not a number: give %s" % (name, shown, wanted))
    except OverflowError:
        raise NumberError("%s=%s is out of range: give %s" % (name, shown, wanted))
    if not math.isfinite(number):
        raise NumberError("%s=%s is not a finite number: give %s" % (name, shown, wanted))
    if number < low or (low_open and number == low) or number > high:
        raise NumberError("%s=%s is out of range: give %s" % (name, shown, wanted))
    return number


def finite_options(params, ranges, optional=True):
    """Every option of ``ranges`` (name -> (low, high, low_open)) made a checked float in
    ``params``, in place; NumberError for the first that is not. With ``optional`` an option
    left unset (None) stays None; without, None is refused like any other non-number."""
    for name, (low, high, low_open) in ranges.items():
        if not optional or params.get(name) is not None:
            params[name] = finite_number(name, params.get(name), low, high, low_open)
    return params

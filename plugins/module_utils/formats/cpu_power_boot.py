# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot-time half of cpu_power: a oneshot systemd unit and the small sh script it runs.

Why a script at boot and not a resident daemon: idle-state ``disable`` flags, the cpufreq
governor and EPP all reset on reboot and stay put once written, so writing them once per boot
is enough; tuned's way (holding /dev/cpu_dma_latency open) needs a process alive forever and
leaves nothing to inspect. Why POSIX sh: the rule is three lines per part ("disable each state
whose latency is above N", "set the governor where offered") and sh reads each state's latency
at boot, so the script stays right when the set of states differs from the one Ansible saw
(another kernel, a CPU that was offline then). It runs with no Python and no Ansible.

The script takes ``GPUFLEET_CPU_SYSFS`` from the environment (default /sys/devices/system/cpu)
so the unit tests run it against a fake tree. It sets what it can, reports what it could not
on stderr (the journal) and exits 1 then.

What runs as root stays root's: the script, its unit and the enable link are root's whatever
the umask (managed_files), and they are written only where trust.py finds that no user but
root can change the directories they land in or the shell the script names (/bin/sh, every
link and directory on the way to it).
"""

from __future__ import annotations

import os

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import trust

UNIT_NAME = "gpufleet-cpu-power.service"
SCRIPT_PATH = "/usr/local/sbin/gpufleet-cpu-power"
SYSTEMD_DIR = "/etc/systemd/system"
SHELL = "/bin/sh"

_SCRIPT_BODY = r"""
cpu_root=${GPUFLEET_CPU_SYSFS:-/sys/devices/system/cpu}
status=0
disabled=0
enabled=0
governors=0
epps=0

say() {
    echo "gpufleet-cpu-power: $*" >&2
}

# set_value FILE VALUE: write when it differs, then read back; true only when it changed.
set_value() {
    current=$(cat "$1" 2>/dev/null) || current=
    [ "$current" = "$2" ] && return 1
    if ! (printf '%s\n' "$2" > "$1") 2>/dev/null; then
        say "cannot write $2 to $1 (was $current)"
        status=1
        return 1
    fi
    current=$(cat "$1" 2>/dev/null) || current=
    if [ "$current" != "$2" ]; then
        say "$1 reads $current after writing $2"
        status=1
        return 1
    fi
    return 0
}

# is_online CPUDIR: cpu0 usually has no online file and cannot go offline.
is_online() {
    [ ! -f "$1/online" ] || [ "$(cat "$1/online" 2>/dev/null)" = 1 ]
}

# offers LIST WORD: whether the space-separated LIST contains WORD.
offers() {
    case " $1 " in
        *" $2 "*) return 0 ;;
    esac
    return 1
}

if [ -n "$max_idle_latency_us" ]; then
    for state in "$cpu_root"/cpu[0-9]*/cpuidle/state[0-9]*; do
        [ -f "$state/latency" ] || continue
        is_online "${state%/cpuidle/*}" || continue
        latency=$(cat "$state/latency" 2>/dev/null) || latency=
        case "$latency" in
            ''|*[!0-9]*) say "cannot read the latency of $state"; status=1; continue ;;
        esac
        if [ "$latency" -gt "$max_idle_latency_us" ]; then
            set_value "$state/disable" 1 && disabled=$((disabled + 1))
        elif [ "$enable_within_bound" = 1 ]; then
            set_value "$state/disable" 0 && enabled=$((enabled + 1))
        fi
    done
fi

for policy in "$cpu_root"/cpufreq/policy[0-9]*; do
    [ -f "$policy/scaling_governor" ] || continue
    # an inactive policy (all its CPUs offline) has no affected CPUs and refuses reads
    [ -n "$(cat "$policy/affected_cpus" 2>/dev/null)" ] || continue
    if [ -n "$governor" ]; then
        available=$(cat "$policy/scaling_available_governors" 2>/dev/null) || available=
        if offers "$available" "$governor"; then
            set_value "$policy/scaling_governor" "$governor" && governors=$((governors + 1))
        else
            say "$policy does not offer governor $governor (available: $available)"
            status=1
        fi
    fi
    if [ -n "$epp" ] && [ -f "$policy/energy_performance_preference" ]; then
        available=$(cat "$policy/energy_performance_available_preferences" 2>/dev/null) || available=
        if offers "$available" "$epp"; then
            set_value "$policy/energy_performance_preference" "$epp" && epps=$((epps + 1))
        else
            say "$policy does not offer energy_performance_preference $epp (available: $available)"
            status=1
        fi
    fi
done

# one line for the journal: what this boot needed
echo "gpufleet-cpu-power: disabled $disabled and enabled $enabled idle state(s), set the governor" \
    "of $governors and the EPP of $epps cpufreq polic(ies)"
exit "$status"
"""


def render_script(max_idle_latency_us, enable_within_bound, governor, epp):
    """The script's text; a None setting becomes an empty variable, which skips that part.

    The values were validated by the engine (an integer, and words of ``[a-z0-9_]``), so they
    sit in single quotes safely.
    """
    def quoted(value):
        return "'%s'" % ("" if value is None else value)

    header = [
        "#!%s" % SHELL,
        "# Managed by Ansible (gpufleet.tuning.cpu_power); run at boot by %s." % UNIT_NAME,
        "# Local edits are overwritten on the next run; remove with persist: false.",
        "# Disables every idle state whose exit latency is above the bound on each online CPU,",
        "# then sets the cpufreq governor and EPP where the policy offers them. Run it again by",
        "# hand after bringing a CPU online: online CPUs only are touched.",
        "max_idle_latency_us=%s" % quoted(max_idle_latency_us),
        "enable_within_bound=%s" % quoted(1 if enable_within_bound else 0),
        "governor=%s" % quoted(governor),
        "epp=%s" % quoted(epp),
    ]
    return "\n".join(header) + "\n" + _SCRIPT_BODY


def render_unit(script_path=SCRIPT_PATH):
    """A oneshot unit, ordered after module loading and udev's coldplug so a cpufreq driver
    built as a module (acpi-cpufreq) has usually registered its policies by then."""
    return "\n".join([
        "# Managed by Ansible (gpufleet.tuning.cpu_power); remove with persist: false.",
        "[Unit]",
        "Description=gpufleet.tuning cpu_power: CPU idle-state bound, cpufreq governor and EPP",
        "After=systemd-modules-load.service systemd-udev-trigger.service",
        "ConditionPathIsDirectory=/sys/devices/system/cpu",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "ExecStart=%s" % script_path,
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ])


def wanted(present, settings, systemd_dir=SYSTEMD_DIR, script_path=SCRIPT_PATH, root=None, trusted_uid=0):
    """The managed_files.Wanted list: unit, enable symlink and script, or all three absent.

    ``settings`` is ``(max_idle_latency_us, enable_within_bound, governor, epp)``. The files to
    write carry trust checks (managed_files.plan refuses them when a user other than
    ``trusted_uid`` could change where they land, or /bin/sh); ``root`` is the top of the tree
    checked, by default the directory holding both ``systemd_dir`` and ``script_path`` (/ on
    a node).
    """
    if not os.path.isabs(script_path):
        raise ValueError("the boot script path %r must be absolute (systemd's ExecStart needs one)" % script_path)
    unit_path = os.path.join(systemd_dir, UNIT_NAME)
    if not present:
        return [managed_files.Wanted(managed_files.unit_wants_link(systemd_dir, UNIT_NAME).path),
                managed_files.Wanted(unit_path), managed_files.Wanted(script_path)]
    checked = dict(trust_root=root or trust.common_root(systemd_dir, script_path), trusted_uid=trusted_uid)
    return [
        managed_files.Wanted(script_path, render_script(*settings), mode=0o755, **checked),
        managed_files.Wanted(unit_path, render_unit(script_path), mode=0o644, **checked),
        managed_files.unit_wants_link(systemd_dir, UNIT_NAME, **checked),
    ]

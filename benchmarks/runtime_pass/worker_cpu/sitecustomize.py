# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CPU time each ansible-playbook worker spends on its task, for benchmarks/runtime_pass.py
--profile-tasks (its profile run only; never in a timed run).

Why: ansible-playbook forks one worker per host and task; the worker templates the task, runs
its action (and, for a module, waits for the host) and returns. How much controller CPU each
task costs per host is what decides how a pass grows with the fleet, and profile_tasks' wall
times cannot say it (on a busy controller they measure the wait for a core). Loaded as
sitecustomize through PYTHONPATH when GPUFLEET_WORKER_CPU_DIR is set: each worker writes one
line, its CPU seconds (user + system, the worker process alone: not the ssh client it starts,
nor the main process's share) and its task's name, to a file of its own in that folder. Any
other process, or ansible-core without the worker class, is left alone.
"""

import os
import resource

FOLDER = os.environ.get("GPUFLEET_WORKER_CPU_DIR")


def _install():
    try:
        from ansible.executor.process import worker
    except Exception:  # pylint: disable=broad-except  # not ansible-playbook: nothing to do
        return
    run = worker.WorkerProcess._run  # pylint: disable=protected-access

    def cpu():
        usage = resource.getrusage(resource.RUSAGE_SELF)  # microseconds, not os.times()' clock ticks
        return usage.ru_utime + usage.ru_stime

    def timed(self):
        start = cpu()
        try:
            return run(self)
        finally:
            spent = cpu() - start
            name = " ".join(str(getattr(self._task, "name", "") or "(unnamed)").split())  # pylint: disable=protected-access
            try:
                with open(os.path.join(FOLDER, "%d.tsv" % os.getpid()), "w") as handle:
                    handle.write("%.4f\t%s\n" % (spent, name))
            except OSError:
                pass

    worker.WorkerProcess._run = timed  # pylint: disable=protected-access


if FOLDER:
    _install()

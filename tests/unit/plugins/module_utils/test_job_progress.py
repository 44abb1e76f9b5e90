"""Following an async job: the progress a measurement writes, and gpufleet.tuning.job_progress
reading it with the job's state from ansible's async folder, on a fake clock."""

import json
import os
import stat

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import job_progress
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import progress
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure


class Clock:
    def __init__(self):
        self.now = 100.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_progress_is_one_json_object_replaced_on_each_step(tmp_path):
    path = str(tmp_path / "p.progress")
    clock = Clock()
    steps = progress.Progress(path, total=3, clock=clock)
    assert progress.read(path)["done"] == 0 and progress.read(path)["what"] == "starting"
    clock.now += 12.34
    steps.update(1, None, "pairs, measuring GPU 0 <-> GPU 2")
    state = progress.read(path)
    assert (state["done"], state["total"], state["what"], state["elapsed_s"]) == (1, 3, "pairs, measuring GPU 0 <-> GPU 2", 12.3)
    assert progress.describe(state) == "1/3 pairs, measuring GPU 0 <-> GPU 2, 12.3 s"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(str(tmp_path)) == ["p.progress"]  # no temporary file left
    progress.remove(path)
    assert progress.read(path) is None and progress.describe(None) == ""


def test_progress_without_a_path_writes_nothing_and_a_failed_write_is_dropped(tmp_path):
    progress.Progress(None, total=2).step("next")
    assert os.listdir(str(tmp_path)) == []
    blocked = tmp_path / "file"
    blocked.write_text("x")
    progress.Progress(str(blocked / "sub" / "p.progress"), total=2).step()  # a file where a folder goes
    assert blocked.read_text() == "x"


def _job(tmp_path, content):
    folder = tmp_path / "async"
    folder.mkdir(exist_ok=True)
    (folder / "j1.42").write_text(content)
    return {"jid": "j1.42", "async_dir": str(folder), "wait_s": 10.0, "progress_path": str(tmp_path / "p.progress")}


def test_a_running_job_is_waited_for_then_its_progress_is_told(tmp_path):
    params = _job(tmp_path, json.dumps({"started": True, "finished": False, "ansible_job_id": "j1.42"}))
    clock = Clock()
    steps = progress.Progress(params["progress_path"], total=28, clock=clock)
    steps.update(12, None, "pairs, measuring GPU 2 <-> GPU 5")
    result = job_progress.run(params, clock=clock, sleep=clock.sleep)
    assert result["finished"] is False and result["waited_s"] == 10.0 and sum(clock.slept) == 10.0
    assert result["msg"] == "12/28 pairs, measuring GPU 2 <-> GPU 5, 0.0 s" and result["progress"]["done"] == 12


def test_a_finished_job_answers_at_once(tmp_path):
    params = _job(tmp_path, json.dumps({"changed": False, "table": "..."}))  # the module's result
    clock = Clock()
    result = job_progress.run(params, clock=clock, sleep=clock.sleep)
    assert result["finished"] is True and result["msg"] == "finished" and clock.slept == []


def test_a_job_that_ends_while_waited_for_is_seen_within_a_second(tmp_path):
    params = _job(tmp_path, json.dumps({"started": True, "finished": False}))
    clock = Clock()

    def sleep(seconds):
        clock.sleep(seconds)
        if clock.now >= 103.0:
            (tmp_path / "async" / "j1.42").write_text(json.dumps({"failed": True, "msg": "boom"}))

    result = job_progress.run(params, clock=clock, sleep=sleep)
    assert result["finished"] is True and result["waited_s"] == 3.0


def test_a_half_written_job_file_is_still_running_and_no_progress_is_said_so(tmp_path):
    params = _job(tmp_path, '{"changed": fal')
    params["wait_s"] = 0
    clock = Clock()
    result = job_progress.run(params, clock=clock, sleep=clock.sleep)
    assert result["finished"] is False and result["msg"] == "running, no progress reported yet"


@pytest.mark.parametrize("change, words", [
    ({"jid": "../../etc/passwd"}, "'../../etc/passwd' is not an async job id"),
    ({"jid": "j9.9"}, "no async job j9.9"),
    ({"wait_s": 601}, "wait_s"),
    ({"wait_s": "soon"}, "wait_s"),
])
def test_bad_input_and_a_missing_job_are_named(tmp_path, change, words):
    params = _job(tmp_path, "{}")
    params.update(change)
    clock = Clock()
    with pytest.raises(ModuleFailure) as failure:
        job_progress.run(params, clock=clock, sleep=clock.sleep)
    assert words in failure.value.message

"""What the controller-side caches' tests share: a run's temporary folder of its own."""

import pytest
from ansible import constants as C


@pytest.fixture
def local_tmp(tmp_path, monkeypatch):
    """tmp_path, with C.DEFAULT_LOCAL_TMP a run's folder under it (tmp/ansible-local-1), so the
    collection's controller folder (plugin_utils/controller_cache.py) is tmp_path/tmp's."""
    run = tmp_path / "tmp" / "ansible-local-1"
    run.mkdir(parents=True)
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(run), raising=False)
    return tmp_path

"""The ``tiny_server`` fixture: one real OpenAI-compatible server for the whole test session.

The model is written into a session temporary folder by the serving venv's Python (the test
venv has neither numpy nor gguf), then tests/serving/server.py starts llama-cpp-python on it.

Without the serving venv the tests are skipped, unless GPUFLEET_REQUIRE_SERVER=1 (the
``serving`` stage sets it): then a missing venv fails them, so CI cannot pass by skipping.
"""

import os
import subprocess
import sys
import types

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(REPO_ROOT, ".collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

# pylint: disable-next=wrong-import-position
from ansible_collections.gpufleet.tuning.tests.serving import server as serving  # noqa: E402

TINY_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_model.py")


@pytest.fixture(scope="session")
def tiny_server(tmp_path_factory):
    """A running server on the tiny model: ``.url``, ``.model`` ("tiny"), ``.model_dir``, ``.log_path``."""
    python = serving.venv_python()
    if not os.path.exists(python):
        reason = f"no serving venv at {serving.venv_dir()} (scripts/stages/serving makes it)"
        if os.environ.get("GPUFLEET_REQUIRE_SERVER") == "1":
            pytest.fail(f"GPUFLEET_REQUIRE_SERVER=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    model_dir = str(tmp_path_factory.mktemp("tiny-model"))
    subprocess.run([python, TINY_MODEL, model_dir], check=True, stdout=subprocess.DEVNULL)
    with serving.start(model_dir) as server:
        yield types.SimpleNamespace(url=server.url, model=server.model, model_dir=model_dir,
                                    log_path=server.log_path, port=server.port)

"""The browser tests: the fleet page opened in a real, headless Chromium (Debian's).

The checkout is made importable as ansible_collections.gpufleet.tuning, as for the unit tests.
Without Chromium the tests are skipped, unless GPUFLEET_REQUIRE_BROWSER=1 (the ``browser``
stage sets it): then a missing browser fails them, so CI cannot pass by skipping. Screenshots
go to tests/output/browser/ (GPUFLEET_BROWSER_OUTPUT to put them elsewhere); the run ends with
a line naming the folder.
"""

import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(REPO_ROOT, ".collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

# pylint: disable-next=wrong-import-position
from ansible_collections.gpufleet.tuning.tests.browser import chromium  # noqa: E402

OUTPUT = os.environ.get("GPUFLEET_BROWSER_OUTPUT") or os.path.join(REPO_ROOT, "tests", "output", "browser")


@pytest.fixture(scope="session")
def browser():
    if not os.access(chromium.CHROMIUM, os.X_OK):
        message = "no Chromium at %s (apt-get install chromium)" % chromium.CHROMIUM
        if os.environ.get("GPUFLEET_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    with chromium.Browser() as running:
        yield running


@pytest.fixture(scope="session")
def output():
    os.makedirs(OUTPUT, exist_ok=True)
    return OUTPUT


def pytest_terminal_summary(terminalreporter):
    if os.path.isdir(OUTPUT) and os.listdir(OUTPUT):
        terminalreporter.write_line("browser screenshots and the page tested: %s" % OUTPUT)

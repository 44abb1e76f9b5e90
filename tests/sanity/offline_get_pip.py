"""Stand-in for the get-pip.py that ansible-test downloads to bootstrap its sanity venvs.

ansible-test fetches get-pip.py from ci-files.testing.ansible.com, which is unreachable from
CI here, and runs it as ``get_pip.py [pip options] pip==X ...``. This does the same with
what Python already carries: ensurepip installs the bundled pip, which then installs the
requested versions from the configured index. ensurepip runs in a child process because it
sets PIP_CONFIG_FILE=/dev/null in its own environment, which would hide pip's index settings.
"""

import subprocess
import sys

ARGS = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
subprocess.check_call([sys.executable, "-m", "pip", "install"] + ARGS)

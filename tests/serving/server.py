"""Start and stop a real OpenAI-compatible server (llama-cpp-python) on the tiny test model.

Standard library only, so any Python can import it: the server itself runs with the serving
venv's Python (``$GPUFLEET_SERVING_VENV``, default ``<repo>/.cache/venv-serving``, made by
``ensure_serving_venv`` in scripts/lib/serving.sh).

The flags matter (llama-cpp-python 0.3.36, seen on a busy 2-core machine):
``--interrupt_requests False`` (else each new request cuts the running stream) and one thread
each (else OpenMP spins on a busy machine and the first token takes up to a second).
The server has no ``/health``: ``/v1/models`` answering is the readiness signal.

Importable (``start()``, ``argv()``) and a CLI that execs the server in the foreground, so it
can be the ``ExecStart=`` of a systemd unit::

    python tests/serving/server.py --model-dir DIR --port 8000
"""

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_ALIAS = "tiny"
GGUF_NAME = "tiny.gguf"  # tiny_model.GGUF_NAME; not imported: that module needs numpy and gguf
READY_TIMEOUT = 60.0


def venv_dir():
    """The serving venv: $GPUFLEET_SERVING_VENV, else .cache/venv-serving in the checkout."""
    return os.environ.get("GPUFLEET_SERVING_VENV") or os.path.join(REPO_ROOT, ".cache", "venv-serving")


def venv_python():
    """The serving venv's Python (has llama_cpp, gguf and numpy)."""
    return os.path.join(venv_dir(), "bin", "python")


def argv(model_folder, port, python=None, host="127.0.0.1"):
    """The server's command line for the model written into model_folder by tiny_model."""
    return [
        python or venv_python(), "-m", "llama_cpp.server",
        "--model", os.path.join(os.path.abspath(model_folder), GGUF_NAME),
        "--model_alias", MODEL_ALIAS,
        "--host", host, "--port", str(port),
        "--n_ctx", "4096",
        "--n_threads", "1", "--n_threads_batch", "1",
        "--interrupt_requests", "False",
    ]


def free_port():
    """A TCP port free on 127.0.0.1 now (the kernel's pick; a race is unlikely in tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(path, lines=40):
    """The last lines of a log file, for error messages."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


def answers(url, timeout=2.0):
    """True when GET url returns 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


class Server:
    """A running server: ``url`` (no trailing slash), ``model``, ``port``, ``stop()``."""

    def __init__(self, process, port, model_folder, log_path):
        self.process = process
        self.port = port
        self.model_folder = model_folder
        self.log_path = log_path
        self.model = MODEL_ALIAS
        self.url = f"http://127.0.0.1:{port}"

    def stop(self, timeout=10.0):
        """Terminate the server; kill it when it does not exit within timeout seconds."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()


def start(model_folder, port=None, log_path=None, timeout=READY_TIMEOUT):
    """Start the server on model_folder and wait until /v1/models answers.

    The log (stdout and stderr) goes to log_path, default server.log in model_folder. Raises
    RuntimeError with the log's tail when the server exits or is not ready within timeout.
    """
    port = port or free_port()
    log_path = log_path or os.path.join(model_folder, "server.log")
    python = venv_python()
    if not os.path.exists(python):
        raise FileNotFoundError(f"no serving venv at {venv_dir()} (scripts/lib/serving.sh: ensure_serving_venv)")
    with open(log_path, "ab") as log:
        # The server outlives this call: Server.stop() ends it.
        process = subprocess.Popen(  # pylint: disable=consider-using-with
            argv(model_folder, port, python), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = Server(process, port, model_folder, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}; {log_path} ends:\n{log_tail(log_path)}")
        if answers(server.url + "/v1/models"):
            return server
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"the server did not answer /v1/models within {timeout:.0f}s; {log_path} ends:\n{log_tail(log_path)}")


def main(args=None):
    """CLI: exec the server in the foreground (for a terminal or a systemd unit)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model-dir", required=True, help="folder written by tiny_model.py")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--python", default=None, help=f"the serving venv's python (default: {venv_python()})")
    options = parser.parse_args(args)
    command = argv(options.model_dir, options.port, options.python, options.host)
    sys.stdout.flush()
    os.execv(command[0], command)


if __name__ == "__main__":
    main()

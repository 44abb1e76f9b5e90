#!/usr/bin/env bash
# Single-stream decode speed of llama.cpp's llama-server (CUDA) on a GPU node, next to the
# memory-bandwidth ceiling: a random-weight float16 Llama of about 1.26 B parameters is served
# on 127.0.0.1:8088 for a benchmark client. Run from the repository root, one step per command
# (each step stays under 10 minutes; /tmp keeps what earlier steps made while the node is held):
#
#   tests/gpu/serving_efficiency.sh build
#       Unpack .gl/llama.cpp-src.tar.gz (a trimmed llama.cpp source tree, CPU and CUDA backends
#       only) to /tmp/llama.cpp and build the llama-server target with CUDA for sm_90 (-j16),
#       no network needed (no curl, no OpenSSL, no web UI download). Skipped when the binary is
#       already built from the same tarball. The build stops itself after BUILD_BUDGET_S
#       (default 540 s, counted from the step's start) and exits 3: run the step again and it
#       resumes where it stopped. Nothing is installed outside /tmp.
#       The tarball (git-ignored, carried): vendor/llama.cpp of llama-cpp-python 0.3.36's source
#       distribution (`pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36`),
#       trimmed to the CPU and CUDA backends; TRIMMED-SOURCE.txt inside lists what was kept.
#   tests/gpu/serving_efficiency.sh model
#       Write the model to /tmp/model/random-llama-f16.gguf (tests/gpu/make_random_llama.py,
#       stdlib Python only; MODEL_ARGS passes other sizes) with its summary (model.json: the
#       parameter count and the weight bytes read per decoded token) and a Hugging Face
#       tokenizer folder (/tmp/model/tokenizer) for clients that count tokens themselves.
#       Skipped when the file is there with the same arguments.
#   tests/gpu/serving_efficiency.sh serve
#       Start llama-server in the background (setsid, its own session) with the model on the GPU:
#       -ngl 99 --ctx-size 4096 -np 4 (4 slots of 1,024 tokens each: with an explicit -np the
#       KV cache is split between slots; SERVE_EXTRA_ARGS="--kv-unified" shares all 4,096),
#       alias "random-llama", --metrics, log in /tmp/llama-server.log. Wait until GET /v1/models
#       answers 200 (it answers 503 while the model loads), print the GPU's memory use, and send
#       one short completion as a smoke test (its timings.predicted_per_second is printed).
#   tests/gpu/serving_efficiency.sh status    is the server up; /health; GPU memory
#   tests/gpu/serving_efficiency.sh stop      stop the server started by `serve` (by its pid)
#   tests/gpu/serving_efficiency.sh info      GPU, driver, nvcc, cmake, Python, cores, memory
#
# Read-only on the node: no clock, power, MIG or driver setting is changed. NVLink multicast off.
# Environment: PORT (8088), LLAMA_SRC_TARBALL, LLAMA_SRC_DIR (/tmp/llama.cpp), MODEL_DIR
# (/tmp/model), MODEL_ARGS, SERVE_EXTRA_ARGS, BUILD_BUDGET_S (540), BUILD_JOBS (16),
# READY_TIMEOUT_S (300), CUDA_ARCH (90).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

REPO="$PWD"
TARBALL="${LLAMA_SRC_TARBALL:-$REPO/.gl/llama.cpp-src.tar.gz}"
SRC="${LLAMA_SRC_DIR:-/tmp/llama.cpp}"
BUILD="$SRC/build"
BIN="$BUILD/bin/llama-server"
MODEL_DIR="${MODEL_DIR:-/tmp/model}"
MODEL="$MODEL_DIR/random-llama-f16.gguf"
MODEL_ARGS="${MODEL_ARGS:-}"
HOST=127.0.0.1
PORT="${PORT:-8088}"
URL="http://$HOST:$PORT"
LOG=/tmp/llama-server.log
PIDFILE=/tmp/llama-server.pid
BUILD_BUDGET_S="${BUILD_BUDGET_S:-540}"
BUILD_JOBS="${BUILD_JOBS:-16}"
READY_TIMEOUT_S="${READY_TIMEOUT_S:-300}"
CUDA_ARCH="${CUDA_ARCH:-90}"

log() { echo "[$(date +%H:%M:%S) +${SECONDS}s] $*"; }

find_nvcc() {
    local c
    for c in "${NVCC:-}" "$(command -v nvcc 2>/dev/null)" /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc; do
        if [ -n "$c" ] && [ -x "$c" ]; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

# HTTP GET with Python (curl may be missing): prints "STATUS BODY", exit 0 when it answered.
http_get() {
    python3 - "$1" <<'EOF'
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        print(r.status, r.read().decode("utf-8", "replace")[:400])
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode("utf-8", "replace")[:400])
except Exception as e:  # not listening yet
    print(0, repr(e))
    sys.exit(1)
EOF
}

gpu_memory() {
    nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv 2>&1
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1
}

server_pid() {
    local pid
    [ -f "$PIDFILE" ] || return 1
    pid="$(cat "$PIDFILE")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

step_info() {
    nvidia-smi 2>&1 | head -20
    local nvcc
    if nvcc="$(find_nvcc)"; then "$nvcc" --version | tail -2; else echo "nvcc: not found"; fi
    cmake --version 2>&1 | head -1
    gcc --version 2>&1 | head -1
    python3 --version 2>&1
    echo "cores: $(nproc)"
    free -g 2>/dev/null | head -2
    df -h /tmp 2>/dev/null | tail -1
}

step_build() {
    [ -f "$TARBALL" ] || { log "missing $TARBALL"; return 2; }
    local stamp nvcc rc remaining
    stamp="$(sha256sum "$TARBALL" | cut -c1-64)"
    if [ -x "$BIN" ] && [ "$(cat "$SRC/.built-from" 2>/dev/null)" = "$stamp" ]; then
        log "already built: $BIN (from $TARBALL)"
        "$BIN" --version 2>&1 | tail -4
        return 0
    fi
    nvcc="$(find_nvcc)" || { log "nvcc not found (PATH, /usr/local/cuda*/bin; or set NVCC)"; return 2; }
    PATH="$(dirname "$nvcc"):$PATH"
    export PATH
    if [ "$(cat "$SRC/.unpacked-from" 2>/dev/null)" != "$stamp" ]; then
        log "unpacking $TARBALL to $SRC"
        rm -rf "$SRC" && mkdir -p "$SRC" || return 2
        tar -xzf "$TARBALL" -C "$SRC" --strip-components=1 || return 2
        echo "$stamp" >"$SRC/.unpacked-from"
    fi
    if [ ! -f "$BUILD/CMakeCache.txt" ]; then
        log "configuring (nvcc: $nvcc)"
        "$nvcc" --version | tail -2
        cmake -S "$SRC" -B "$BUILD" \
            -DCMAKE_BUILD_TYPE=Release \
            -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DCMAKE_CUDA_COMPILER="$nvcc" \
            -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
            -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DGGML_CCACHE=OFF \
            >"$SRC/configure.log" 2>&1
        rc=$?
        grep -E "CUDA|version|Including|WARN|Error" "$SRC/configure.log" | head -30
        if [ "$rc" != 0 ]; then
            tail -40 "$SRC/configure.log"
            rm -f "$BUILD/CMakeCache.txt"
            log "configure failed ($rc)"
            return 2
        fi
    fi
    remaining=$((BUILD_BUDGET_S - SECONDS))
    [ "$remaining" -gt 30 ] || remaining=30
    log "building llama-server with -j$BUILD_JOBS (stops itself after ${remaining}s; log $SRC/build.log)"
    # timeout signals its whole process group (make, nvcc, the compilers), which remove their
    # partial outputs, so a second run resumes cleanly.
    timeout -s TERM "$remaining" cmake --build "$BUILD" --target llama-server -j "$BUILD_JOBS" >>"$SRC/build.log" 2>&1
    rc=$?
    grep -E "^\[ *[0-9]+%\]" "$SRC/build.log" | tail -1
    if [ "$rc" = 124 ]; then
        log "not finished within the budget: run 'build' again, it resumes"
        return 3
    fi
    if [ "$rc" != 0 ] || [ ! -x "$BIN" ]; then
        grep -iE "error|fatal" "$SRC/build.log" | head -30
        tail -20 "$SRC/build.log"
        log "build failed ($rc)"
        return 2
    fi
    echo "$stamp" >"$SRC/.built-from"
    log "built $BIN"
    "$BIN" --version 2>&1 | tail -4
    ldd "$BIN" | grep -iE "cuda|cublas|ggml|not found"
    return 0
}

step_model() {
    local args="--out $MODEL --json $MODEL_DIR/model.json --tokenizer-dir $MODEL_DIR/tokenizer $MODEL_ARGS"
    if [ -f "$MODEL" ] && [ -f "$MODEL_DIR/model.json" ] && [ "$(cat "$MODEL_DIR/.args" 2>/dev/null)" = "$args" ]; then
        log "model already there: $MODEL"
        cat "$MODEL_DIR/model.json"
        return 0
    fi
    mkdir -p "$MODEL_DIR" || return 2
    rm -f "$MODEL_DIR/.args"
    log "writing $MODEL"
    # shellcheck disable=SC2086  # MODEL_ARGS is a list of options
    python3 tests/gpu/make_random_llama.py $args || return 2
    echo "$args" >"$MODEL_DIR/.args"
    ls -l "$MODEL"
    df -h "$MODEL_DIR" | tail -1
}

step_serve() {
    local pid deadline answer
    if pid="$(server_pid)"; then
        log "already running (pid $pid); 'stop' first to restart"
        http_get "$URL/health"
        return 0
    fi
    [ -x "$BIN" ] || { log "no $BIN: run 'build' first"; return 2; }
    [ -f "$MODEL" ] || { log "no $MODEL: run 'model' first"; return 2; }
    log "starting llama-server on $URL (log $LOG)"
    local detach=()
    command -v setsid >/dev/null && detach=(setsid)
    # shellcheck disable=SC2086  # SERVE_EXTRA_ARGS is a list of options
    "${detach[@]}" nohup "$BIN" -m "$MODEL" --host "$HOST" --port "$PORT" -ngl 99 --ctx-size 4096 -np 4 \
        --alias random-llama --metrics ${SERVE_EXTRA_ARGS:-} >"$LOG" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$PIDFILE"
    deadline=$((SECONDS + READY_TIMEOUT_S))
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -40 "$LOG"
            log "llama-server exited before it was ready"
            rm -f "$PIDFILE"
            return 1
        fi
        answer="$(http_get "$URL/v1/models")"
        case "$answer" in 200\ *) break ;; esac
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -40 "$LOG"
            log "not ready after ${READY_TIMEOUT_S}s (last answer: $answer)"
            return 1
        fi
        sleep 1
    done
    log "ready (pid $pid): GET /v1/models -> $answer"
    grep -iE "cuda|offloaded|flash_attn|n_ctx|n_slots|kv_unified|model size|KV buffer|compute buffer" "$LOG" | head -30
    http_get "$URL/health"
    gpu_memory
    smoke
}

# One short completion: checks that tokens come out and shows the server's own decode rate.
smoke() {
    python3 - "$URL" <<'EOF'
import json, sys, time, urllib.request
url = sys.argv[1] + "/completion"
body = {"prompt": "The fleet", "n_predict": 64, "ignore_eos": True, "temperature": 0, "cache_prompt": False}
req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
t0 = time.time()
with urllib.request.urlopen(req, timeout=120) as r:
    out = json.load(r)
wall = time.time() - t0
t = out.get("timings", {})
print("smoke: %d tokens in %.3f s wall; server: predicted_per_second %.1f, predicted_per_token_ms %.3f, prompt_n %s"
      % (t.get("predicted_n", -1), wall, t.get("predicted_per_second", 0), t.get("predicted_per_token_ms", 0),
         t.get("prompt_n")))
print("smoke: stop_type=%s text=%r" % (out.get("stop_type"), out.get("content", "")[:120]))
EOF
}

step_status() {
    local pid
    if pid="$(server_pid)"; then
        log "running (pid $pid) on $URL"
    else
        log "not running"
    fi
    http_get "$URL/health"
    gpu_memory
}

step_stop() {
    local pid _
    if ! pid="$(server_pid)"; then
        log "not running"
        rm -f "$PIDFILE"
        return 0
    fi
    kill -TERM "$pid"
    for _ in $(seq 1 20); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "still running after 10 s; sending KILL to $pid"
        kill -KILL "$pid"
    fi
    rm -f "$PIDFILE"
    log "stopped (pid $pid)"
    tail -5 "$LOG"
}

case "${1:-}" in
    build) step_build ;;
    model) step_model ;;
    serve) step_serve ;;
    status) step_status ;;
    stop) step_stop ;;
    info) step_info ;;
    *)
        sed -n '2,33p' "$0" >&2
        exit 2
        ;;
esac

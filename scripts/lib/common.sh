# shellcheck shell=bash
# Shared by scripts/tune and scripts/test: the Python environments and stage timing.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export ANSIBLE_CONFIG="$REPO_ROOT/ansible.cfg"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# A Python >= 3.11 that can make a venv with pip (ansible-core 2.19 needs 3.11).
find_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null &&
           "$candidate" -c 'import ensurepip, venv' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

# Debian/Ubuntu ship venv and ensurepip in python3-venv; install it when it is missing.
install_python_venv() {
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        log "installing python3-venv (apt)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
    else
        die "need Python >= 3.11 with venv; on Debian/Ubuntu: apt-get install python3-venv (as root)"
    fi
}

# ensure_venv DIR REQUIREMENTS: create DIR and install REQUIREMENTS (with the constraints
# lock) unless the same files were installed there already. Idempotent and fast when done.
ensure_venv() {
    local dir="$1" requirements="$2" python stamp want
    want="$(cat "$REPO_ROOT/requirements/"*.txt | sha256sum | cut -d' ' -f1)"
    stamp="$dir/.gpufleet-requirements"
    if [ -x "$dir/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want $(basename "$requirements")" ]; then
        return 0
    fi
    python="$(find_python)" || { install_python_venv; python="$(find_python)" || die "no usable Python >= 3.11"; }
    log "creating $dir from $requirements (python: $python)"
    rm -rf "$dir"
    "$python" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip
    "$dir/bin/python" -m pip install -q -r "$requirements" -c "$REPO_ROOT/requirements/constraints.txt"
    echo "$want $(basename "$requirements")" >"$stamp"
}

# stage NAME COMMAND...: run a test stage, record its time and outcome. A stage that is a
# script runs under a time limit, so one that hangs (a dead ssh connection, a guest that never
# boots) fails with a message saying so instead of eating the whole CI budget: at most
# TEST_STAGE_LIMIT seconds (default 1800), and never past TEST_BUDGET seconds (default 4800)
# counted from the first stage. `timeout` signals the stage's whole process group; the stage
# scripts' EXIT traps stop what they started (the VM, the podman store).
STAGE_REPORT=()
TEST_START="${TEST_START:-$(date +%s)}"
stage() {
    local name="$1" start rc limit left
    shift
    start=$(date +%s)
    left=$(( ${TEST_BUDGET:-4800} - (start - TEST_START) ))
    limit=${TEST_STAGE_LIMIT:-1800}
    [ "$left" -lt "$limit" ] && limit=$(( left > 0 ? left : 0 ))
    log "stage $name (at +$(( start - TEST_START ))s, limit ${limit}s)"
    if [ "$limit" -lt 60 ]; then
        log "stage $name: not run, the test budget (TEST_BUDGET=${TEST_BUDGET:-4800}s) is spent"
        rc=124
    else
        set +e
        if [ -f "$1" ] && [ -x "$1" ]; then
            timeout --kill-after=120 "$limit" "$@"
        else
            "$@"
        fi
        rc=$?
        set -e
        [ "$rc" = 124 ] && log "stage $name: killed after its ${limit}s limit"
    fi
    STAGE_REPORT+=("$(printf '%-22s %-6s %5ss' "$name" "$([ "$rc" = 0 ] && echo ok || { [ "$rc" = 124 ] && echo TIMEOUT; } || echo FAILED)" "$(( $(date +%s) - start ))")")
    return "$rc"
}

print_stage_report() {
    printf '\n%-22s %-6s %6s\n' stage result time
    printf '%s\n' "${STAGE_REPORT[@]}"
}

# ensure_debs PACKAGE...: install the Debian packages not installed yet (root + apt only).
ensure_debs() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} = 0 ] && return 0
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        log "installing ${missing[*]} (apt)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        die "missing Debian packages: ${missing[*]} (install them, or run as root on Debian/Ubuntu)"
    fi
}

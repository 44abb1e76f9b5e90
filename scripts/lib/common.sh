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

# stage NAME COMMAND...: run a test stage, record its time and outcome.
STAGE_REPORT=()
stage() {
    local name="$1" start rc
    shift
    log "stage $name"
    start=$(date +%s)
    set +e
    "$@"
    rc=$?
    set -e
    STAGE_REPORT+=("$(printf '%-22s %-6s %5ss' "$name" "$([ $rc = 0 ] && echo ok || echo FAILED)" "$(( $(date +%s) - start ))")")
    return $rc
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

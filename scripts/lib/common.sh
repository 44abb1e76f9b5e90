# shellcheck shell=bash
# Shared by scripts/tune and scripts/test: the Python environments and stage timing.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export ANSIBLE_CONFIG="$REPO_ROOT/ansible.cfg"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# A Python >= 3.11 that can make a venv with pip (ansible-core 2.19 needs 3.11): $PYTHON when
# set, else the system's /usr/bin/python3, else python3 from PATH. The system Python comes
# first so the environments do not depend on what else a machine has: on the CI machines
# pyenv's shims lead PATH, and its python3 is whatever `pyenv global` (or a .python-version
# file) says at the time.
python_usable() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null &&
        "$1" -c 'import ensurepip, venv' 2>/dev/null
}

find_python() {
    local candidate
    if [ -n "${PYTHON:-}" ]; then
        python_usable "$PYTHON" && { echo "$PYTHON"; return 0; }
        log "PYTHON=$PYTHON is not a Python >= 3.11 with venv and ensurepip"
        return 1
    fi
    for candidate in /usr/bin/python3 python3; do
        command -v "$candidate" >/dev/null 2>&1 || continue
        if python_usable "$candidate"; then
            echo "$candidate"
            return 0
        fi
        # The system Python lacking only python3-venv: have it installed (ensure_venv does,
        # as root with apt) rather than fall back to another Python.
        if [ "$candidate" = /usr/bin/python3 ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
           "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            return 1
        fi
    done
    return 1
}

# Debian/Ubuntu ship venv and ensurepip in python3-venv; install it when it is missing.
install_python_venv() {
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        log "installing python3-venv (apt)"
        apt_install python3 python3-venv
    else
        die "need Python >= 3.11 with venv; on Debian/Ubuntu: apt-get install python3-venv (as root)"
    fi
}

# ensure_venv DIR REQUIREMENTS [CONSTRAINTS]: create DIR and install REQUIREMENTS (with the
# constraints lock, requirements/constraints.txt unless CONSTRAINTS names another file; an empty
# CONSTRAINTS installs REQUIREMENTS alone, for a file that pins its whole tree itself) unless the
# same files were installed there already. Idempotent and fast when done.
ensure_venv() {
    local dir="$1" requirements="$2" constraints="${3-$REPO_ROOT/requirements/constraints.txt}" python stamp want
    want="$(cat "$REPO_ROOT/requirements/"*.txt | sha256sum | cut -d' ' -f1)"
    stamp="$dir/.gpufleet-requirements"
    # The venv's own python must still start: a venv outlives the interpreter it was made
    # from (a pyenv version removed, a Python upgraded) and then fails in every stage.
    if [ -x "$dir/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want $(basename "$requirements")" ] &&
       "$dir/bin/python" -c '' 2>/dev/null; then
        return 0
    fi
    python="$(find_python)" || { install_python_venv; python="$(find_python)" || die "no usable Python >= 3.11"; }
    log "creating $dir from $requirements (python: $python)"
    rm -rf "$dir"
    "$python" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip
    "$dir/bin/python" -m pip install -q -r "$requirements" ${constraints:+-c "$constraints"}
    echo "$want $(basename "$requirements")" >"$stamp"
}

# stage NAME COMMAND...: run a test stage, record its time and outcome. A stage that is a
# script runs under a time limit, so one that hangs (a dead ssh connection, a guest that never
# boots) fails with a message saying so instead of eating the whole CI budget: at most
# TEST_STAGE_LIMIT seconds (default 1800), and never past TEST_BUDGET seconds (default 4800)
# counted from the first stage. `timeout` signals the stage's whole process group; the stage
# scripts' EXIT traps stop what they started (the VM, the podman store).
STAGE_REPORT=()
STAGE_LOG_DIR="$REPO_ROOT/.cache/stage-logs"
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
        mkdir -p "$STAGE_LOG_DIR"
        if [ -f "$1" ] && [ -x "$1" ]; then
            timeout --kill-after=120 "$limit" "$@" 2>&1 | tee "$STAGE_LOG_DIR/$name.log"
        else
            "$@" 2>&1 | tee "$STAGE_LOG_DIR/$name.log"
        fi
        rc=${PIPESTATUS[0]}
        set -e
        [ "$rc" = 124 ] && log "stage $name: killed after its ${limit}s limit"
    fi
    STAGE_REPORT+=("$(printf '%-22s %-6s %5ss' "$name" "$([ "$rc" = 0 ] && echo ok || { [ "$rc" = 124 ] && echo TIMEOUT; } || echo FAILED)" "$(( $(date +%s) - start ))")")
    return "$rc"
}

# print_failure_digest NAME...: what made each named stage fail, from its log: the test
# failures, assertion and error lines, and the end of the log. Printed before the stage table
# at the end of the run because CI keeps only the tail of a run's output, and a stage that
# fails early is otherwise scrolled away by the stages after it.
print_failure_digest() {
    local name file
    for name in "$@"; do
        file="$STAGE_LOG_DIR/$name.log"
        [ -f "$file" ] || continue
        printf '\n==> why stage %s failed (from %s)\n' "$name" "${file#"$REPO_ROOT"/}"
        sed -e 's/\x1b\[[0-9;]*m//g' "$file" |
            grep -E '(FAILED|ERROR|Error|Traceback|fatal: |failed: |AssertionError|assert |^[^a-z]*E  )' |
            grep -v -E 'failed=0|ignore_errors' | tail -n 60 || true
        printf -- '--- last lines of %s\n' "$name"
        sed -e 's/\x1b\[[0-9;]*m//g' "$file" | tail -n 25
    done
}

print_stage_report() {
    printf '\n%-22s %-6s %6s\n' stage result time
    printf '%s\n' "${STAGE_REPORT[@]}"
}

# ---------------------------------------------------------------------------- apt
# Every apt-get of the scripts goes through apt_get, which waits for the package manager's
# locks instead of failing at once. Right after boot the machine's own apt (apt-daily's
# `apt-get update`, unattended-upgrades, cloud-init, PackageKit) can hold them for minutes.
#
# - `-o DPkg::Lock::Timeout=N` makes apt-get wait for /var/lib/dpkg/lock-frontend and
#   /var/lib/dpkg/lock, but (apt 2.6, tested) not for /var/lib/apt/lists/lock, which
#   `apt-get update` takes, nor for /var/cache/apt/archives/lock, which a download takes:
#   with those held it still fails in a second ("E: Could not get lock
#   /var/lib/apt/lists/lock. It is held by process N (apt-get)"). So apt_get also retries
#   while apt-get reports a lock, every 5 s, until the same deadline.
# - apt's locks are fcntl (POSIX) record locks; flock(1) takes a different kind of lock that
#   apt does not see, so `flock /var/lib/dpkg/lock-frontend ...` does not block apt.
# - A failed download (update or install) is retried twice, 15 s and 45 s later.
# GPUFLEET_APT_LOCK_TIMEOUT (seconds, default 600) bounds the wait for the locks;
# GPUFLEET_APT_LOCK_POLL (5) and GPUFLEET_APT_RETRY_DELAYS ("15 45") set the pauses.
APT_LOCKS=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock)

# apt_lock_holders: "LOCK held by pid N (command)" for each apt/dpkg lock a process holds now,
# read from /proc/locks ("1: POSIX  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF", the
# device numbers in hex), so neither lsof nor fuser is needed. FLOCK entries are left out:
# apt does not see them.
apt_lock_holders() {
    local lock major minor inode pid
    for lock in "${APT_LOCKS[@]}"; do
        [ -e "$lock" ] || continue
        read -r major minor inode < <(stat -c '%Hd %Ld %i' "$lock")
        sed 's/ -> / /' /proc/locks 2>/dev/null |
            awk -v id="$(printf '%02x:%02x:%s' "$major" "$minor" "$inode")" '$2 != "FLOCK" && $6 == id { print $5 }' | sort -u |
            while read -r pid; do
                printf '%s held by pid %s (%s)\n' "$lock" "$pid" "$(cat "/proc/$pid/comm" 2>/dev/null || echo gone)"
            done
    done
}

# apt_get ARGS...: apt-get ARGS, waiting for the locks and retrying failed downloads (above).
# apt-get's stderr is shown once the attempt that counts is over. On failure APT_FAILURE says
# why: lock (still held at the deadline), download, or other.
APT_FAILURE=""
apt_get() {
    local deadline now left rc err attempt=0 waiting=false holders delays
    read -r -a delays <<<"${GPUFLEET_APT_RETRY_DELAYS:-15 45}"
    deadline=$(( $(date +%s) + ${GPUFLEET_APT_LOCK_TIMEOUT:-600} ))
    err="$(mktemp "${TMPDIR:-/tmp}/gpufleet-apt.XXXXXX")"
    APT_FAILURE=""
    # Say so up front when another process holds a lock: apt-get waits for the dpkg locks by
    # itself, silently.
    holders="$(apt_lock_holders)"
    if [ -n "$holders" ]; then
        log "apt-get: waiting (up to ${GPUFLEET_APT_LOCK_TIMEOUT:-600}s) for the package manager's lock:"
        printf '%s\n' "$holders" | sed 's/^/    /' >&2
        waiting=true
    fi
    while :; do
        now=$(date +%s)
        left=$(( deadline > now ? deadline - now : 0 ))
        rc=0
        # C locale: the messages below are matched in English.
        LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$left" \
            -o Acquire::Retries=3 "$@" 2>"$err" || rc=$?
        [ "$rc" = 0 ] && break
        if grep -qE '^E: (Could not get lock|Unable to (acquire the dpkg frontend lock|lock))' "$err"; then
            APT_FAILURE=lock
            if [ "$(date +%s)" -lt "$deadline" ]; then
                if ! $waiting; then
                    log "apt-get: waiting (up to $(( deadline - $(date +%s) ))s) for the package manager's lock:"
                    { apt_lock_holders; grep -m1 '^E: Could not get lock' "$err"; } | sed 's/^/    /' >&2
                    waiting=true
                fi
                sleep "${GPUFLEET_APT_LOCK_POLL:-5}"
                continue
            fi
            log "apt-get: the package manager's lock was still held after ${GPUFLEET_APT_LOCK_TIMEOUT:-600}s"
            apt_lock_holders | sed 's/^/    /' >&2
            break
        fi
        if grep -qE '^(E|W): (Failed to fetch|Unable to fetch|Some index files failed to download|Temporary failure resolving|Could not (connect|resolve))' "$err"; then
            APT_FAILURE=download
            if [ "$attempt" -lt "${#delays[@]}" ]; then
                log "apt-get: download failed (try $(( attempt + 1 )) of $(( ${#delays[@]} + 1 ))); trying again in ${delays[$attempt]}s:"
                grep -E '^(E|W): ' "$err" | head -n 5 | sed 's/^/    /' >&2
                sleep "${delays[$attempt]}"
                attempt=$(( attempt + 1 ))
                continue
            fi
        else
            APT_FAILURE=other
        fi
        break
    done
    if $waiting && [ "$rc" = 0 ]; then
        log "apt-get: done after $(( $(date +%s) - deadline + ${GPUFLEET_APT_LOCK_TIMEOUT:-600} ))s, waiting for the lock included"
    fi
    cat "$err" >&2
    rm -f "$err"
    return "$rc"
}

# apt_update: refresh the package lists. Each try fails on any index that did not download
# (APT::Update::Error-Mode=any; apt before 2.1 ignores it), so a transient mirror or network
# failure is retried; when a source still fails after the retries, a last plain update keeps
# what it could fetch (apt's default) and the install says what is missing.
apt_update() {
    apt_get -o APT::Update::Error-Mode=any update -qq && return 0
    [ "$APT_FAILURE" = download ] || return 1
    log "apt-get update: some index files still fail to download; going on with the lists apt has"
    apt_get update -qq
}

# apt_install PACKAGE...: update the lists, then install the packages without recommends.
apt_install() {
    apt_update || return 1
    apt_get install -y -qq --no-install-recommends "$@" >/dev/null
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
        apt_install "${missing[@]}"
    else
        die "missing Debian packages: ${missing[*]} (install them, or run as root on Debian/Ubuntu)"
    fi
}

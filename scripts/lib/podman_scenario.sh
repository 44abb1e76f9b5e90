# shellcheck shell=bash
# run_podman_scenario NAME [MOLECULE ARGS...]: `molecule test -s NAME` in the podman harness
# (scripts/harness/podman), for the stages molecule-container and molecule-host.
#
# - One harness user at a time (a lock in .cache/podman/): the stages share the store.
# - The harness is set up (packages, config, image from the cached rootfs) and torn down
#   whatever happens, so no container and no image store outlive the stage.
# - Around the scenario, this machine's /proc/sys is recorded and compared afterwards: the
#   scenario restores what its containers changed (cleanup/destroy); a key still differing
#   here is put back too and fails the stage.
# - Every line of molecule's output gets the time since the scenario started, and the stage
#   ends with how long each molecule step, the setup and the teardown took.
# - A stage that starts more on this machine than the harness tears down defines a function
#   podman_scenario_cleanup before calling run_podman_scenario (molecule-fleet: the /etc/pve
#   FUSE mounts). It runs after the harness teardown, on success (where it failing fails the
#   stage: the scenario's destroy should have left nothing) and from the exit trap.
# - SIGTERM, SIGINT and SIGHUP (scripts/test's stage time limit signals the stage's process
#   group) end the stage through its exit trap: bash runs an EXIT trap on a trapped signal
#   only, not when an untrapped one kills it.

# Prefixes each line with the elapsed time and keeps "step seconds" for each molecule step
# ("<scenario> ➜ <step>: Executing" ... "Executed") in the file named by $1.
_timestamp_molecule_steps() {
    local steps_file="$1" line plain step="" step_start=0 now
    local ansi=$'\e''\[*([0-9;])m'
    shopt -s extglob
    SECONDS=0
    while IFS= read -r line; do
        now=$SECONDS
        printf '[%2d:%02d] %s\n' $(( now / 60 )) $(( now % 60 )) "$line"
        plain="${line//$ansi/}"
        if [[ "$plain" == *" ➜ "*": Executing"* ]]; then
            step="${plain##* ➜ }"
            step="${step%%:*}"
            step_start=$now
        elif [[ -n "$step" && "$plain" == *" ➜ $step: Executed"* ]]; then
            printf '%s %s\n' "$step" $(( now - step_start )) >>"$steps_file"
            step=""
        fi
    done
}

run_podman_scenario() {
    local scenario="$1" harness="$REPO_ROOT/scripts/harness/podman" guard="$REPO_ROOT/molecule/resources/sysctl_guard.py"
    local venv before steps rc=0 t_start t_setup t_test t_teardown step seconds
    shift
    venv="${VENV_TEST:-$REPO_ROOT/.venv-test}"
    export PATH="$venv/bin:$PATH"
    mkdir -p "$REPO_ROOT/.cache/podman"
    exec 9>"$REPO_ROOT/.cache/podman/lock"
    if ! flock -n 9; then
        log "waiting for another user of the podman harness to finish"
        flock 9
    fi
    before="$(mktemp "$REPO_ROOT/.cache/podman/sysctl-before-$scenario.XXXXXX")"
    steps="$(mktemp "$REPO_ROOT/.cache/podman/steps-$scenario.XXXXXX")"
    # Interrupted (or failed before the end): put the sysctls back, then tear down.
    # shellcheck disable=SC2064  # expand now: the paths are fixed for this run
    trap "[ -s \"$before\" ] && \"$venv/bin/python\" \"$guard\" restore \"$before\" >&2; \"$harness\" teardown 9>&- || true; if declare -F podman_scenario_cleanup >/dev/null; then podman_scenario_cleanup 9>&- || true; fi; rm -f \"$before\" \"$steps\"" EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    trap 'exit 129' HUP

    t_start=$(date +%s)
    # fd 9 (the lock) is closed for children: a daemon (conmon) must not keep holding it.
    "$harness" setup 9>&-
    eval "$("$harness" env)"
    t_setup=$(date +%s)
    "$venv/bin/python" "$guard" snapshot "$before" >/dev/null

    set +e
    (cd "$REPO_ROOT" && molecule test -s "$scenario" "$@" 2>&1 9>&-) | _timestamp_molecule_steps "$steps"
    rc=${PIPESTATUS[0]}
    set -e
    t_test=$(date +%s)

    if ! "$venv/bin/python" "$guard" diff "$before" >/dev/null; then
        log "sysctls of this machine still differ after scenario $scenario; putting them back:"
        "$venv/bin/python" "$guard" restore "$before" >&2 || true
        rc=1
    fi
    "$harness" teardown 9>&-
    if declare -F podman_scenario_cleanup >/dev/null && ! podman_scenario_cleanup 9>&-; then
        log "the cleanup of scenario $scenario failed"
        rc=1
    fi
    t_teardown=$(date +%s)
    printf '\n%-26s %6s\n' "molecule-$scenario" time
    printf '%-26s %5ss\n' "harness setup" $(( t_setup - t_start ))
    while read -r step seconds; do
        printf '%-26s %5ss\n' "  $step" "$seconds"
    done <"$steps"
    printf '%-26s %5ss\n' "molecule test" $(( t_test - t_setup ))
    printf '%-26s %5ss\n' "harness teardown" $(( t_teardown - t_test ))
    printf '%-26s %5ss\n' "total" $(( t_teardown - t_start ))
    rm -f "$before" "$steps"
    trap - EXIT TERM INT HUP
    return "$rc"
}

#!/usr/bin/env bash
# On a real GPU node, read-only: the profile its facts choose and its real figures against the
# profile's expectations (docs/profiles.md), from a checkout with ansible-core importable:
#   tests/gpu/profiles.sh OUTDIR [EXPECTED_PLATFORM]
# 1. playbooks/audit.yml (the audit chooses the profile; profile.json, audit.json, system-improve.md)
# 2. tests/gpu/profile_check.py: the choice against nvidia-smi, the expectations checked
# 3. playbooks/health.yml: health.json carries the profile and its expectations
# 4. playbooks/tune.yml --check --diff as chosen, then with another profile pinned and the latency
#    intent (what that would change), then with CPU isolation the housekeeping rail refuses
# Every tuning task runs in check mode; nothing on the node is changed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out="${1:?OUTDIR}"
expect="${2:-}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
dirs=(-e "audit_artifacts_dir=$out/artifacts" -e "verify_artifacts_dir=$out/artifacts" -e "serving_artifacts_dir=$out/artifacts")
rc=0
step() {
    local name="$1" want="$2" status
    shift 2
    echo "=== $name: $*"
    "$@" >"$out/$name.log" 2>&1
    status=$?
    echo "=== $name: exit $status (expected $want)"
    tail -n 40 "$out/$name.log"
    [ "$status" = "$want" ] || rc=1
}
step audit 0 ansible-playbook playbooks/audit.yml "${dirs[@]}"
step profile-check 0 python3 tests/gpu/profile_check.py "$out/artifacts/localhost" ${expect:+--expect-platform "$expect"}
step compare-facts 0 python3 tests/gpu/compare_facts.py "$out/artifacts/localhost/audit.json" "$out"
step health 0 ansible-playbook playbooks/health.yml "${dirs[@]}"
step tune-check 0 ansible-playbook playbooks/tune.yml --tags runtime --check --diff "${dirs[@]}" -e verify_p2p_enabled=false
step tune-pinned 0 ansible-playbook playbooks/tune.yml --tags runtime,reboot_required --check --diff "${dirs[@]}" \
    -e verify_p2p_enabled=false -e gpufleet_profile=rtx-pro-6000-blackwell -e gpufleet_profile_intent=latency
online="$(cat /sys/devices/system/cpu/online)"
step guard-rail 2 ansible-playbook playbooks/tune.yml --tags runtime --check "${dirs[@]}" -e verify_p2p_enabled=false \
    -e "{\"host_cmdline_extra\": [\"isolcpus=managed_irq,domain,1-${online##*-}\"]}"
grep -h "guard rail" "$out/guard-rail.log" | head -3
exit $rc

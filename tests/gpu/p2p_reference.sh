#!/usr/bin/env bash
# The P2P latency of gpufleet.tuning.p2p_bandwidth next to NVIDIA's p2pBandwidthLatencyTest
# (cuda-samples, Samples/5_Domain_Specific/p2pBandwidthLatencyTest), both in the same run.
#
#   tests/gpu/p2p_reference.sh extract GIT_DIR DEST
#       Here, not on the node: write the sample's folder and the top-level headers of Common/ from
#       a cuda-samples git directory (a bare mirror is fine) into DEST (about 0.5 MB) to carry.
#   tests/gpu/p2p_reference.sh [run] SAMPLES_DIR [OUTDIR]
#       On the GPU node, from a checkout of this repository: build the sample from SAMPLES_DIR
#       with the node's nvcc (/usr/local/cuda*/bin), run it, write its latency matrices to
#       OUTDIR/reference.json, run benchmarks/p2p_matrix.py --json OUTDIR/module.json, and print
#       both P2P latencies per GPU pair with the ratio. Exit 1 when ours is more than 10 % above
#       the reference on any pair (P2P_REFERENCE_TOLERANCE=0.10), 2 when something did not run.
#       It also times each latency method of the module on its own (OUTDIR/methods.json), for
#       the record; that table does not decide the exit status.
# Read-only on the node: no driver, clock or module setting is changed. NVLink multicast stays off.
# Both programs number GPUs in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID), so pairs match.
# Environment: NVCC (the compiler), NVCC_ARCH (default: sm_90 code plus compute_90 PTX),
# P2P_MATRIX_ARGS (default: --no-torch --no-staged; latency is what is compared here).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
SAMPLE=Samples/5_Domain_Specific/p2pBandwidthLatencyTest

usage() {
    sed -n '2,20p' "$0" >&2
    exit 2
}

extract() {
    local git_dir="$1" dest="$2" rev path count=0
    rev="$(git --git-dir="$git_dir" rev-parse HEAD)" || exit 2
    mkdir -p "$dest/$SAMPLE" "$dest/Common" || exit 2
    # The sample's folder as a tree of its own (no walk through the rest of the repository, whose
    # large files a mirror may lack), then the top-level files of Common/: the headers the sample
    # includes (helper_cuda.h, helper_string.h, helper_timer.h, exception.h, ...), not its data
    # or prebuilt libraries.
    git --git-dir="$git_dir" archive --format=tar "HEAD:$SAMPLE" | tar -x -C "$dest/$SAMPLE" || exit 2
    while read -r _mode type _object path; do
        [ "$type" = blob ] || continue
        git --git-dir="$git_dir" show "HEAD:$path" >"$dest/$path" || exit 2
        count=$((count + 1))
    done < <(git --git-dir="$git_dir" ls-tree HEAD Common/)
    echo "$rev" >"$dest/REVISION"
    echo "cuda-samples $rev: $SAMPLE and $count files of Common/ written to $dest"
}

find_nvcc() {
    if [ -n "${NVCC:-}" ]; then echo "$NVCC"; return; fi
    local candidate found=""
    for candidate in /usr/local/cuda*/bin/nvcc; do
        [ -x "$candidate" ] && found="$(printf '%s\n%s\n' "$found" "$candidate" | sed '/^$/d' | sort -V | tail -n 1)"
    done
    [ -n "$found" ] || found="$(command -v nvcc || true)"
    echo "$found"
}

run() {
    local samples="$1" out="$2" nvcc repo
    [ -f "$samples/$SAMPLE/p2pBandwidthLatencyTest.cu" ] || {
        echo "no $SAMPLE/p2pBandwidthLatencyTest.cu under $samples (see: $0 extract)" >&2; exit 2; }
    repo="$(cd "$(dirname "$0")/../.." && pwd)"
    mkdir -p "$out" && out="$(cd "$out" && pwd)" || exit 2
    nvcc="$(find_nvcc)"
    [ -x "$nvcc" ] || { echo "no nvcc under /usr/local/cuda*/bin or on PATH (set NVCC)" >&2; exit 2; }
    echo "=== build with $nvcc ($("$nvcc" --version | tail -n 1))"
    # shellcheck disable=SC2086
    "$nvcc" -O2 -std=c++17 -lineinfo -Wno-deprecated-gpu-targets -I"$samples/Common" \
        ${NVCC_ARCH:--gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90} \
        -o "$out/p2pBandwidthLatencyTest" "$samples/$SAMPLE/p2pBandwidthLatencyTest.cu" || exit 2
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm --format=csv \
        >"$out/nvidia-smi.csv" 2>&1 && cat "$out/nvidia-smi.csv"
    echo "=== reference: p2pBandwidthLatencyTest"
    "$out/p2pBandwidthLatencyTest" >"$out/reference.txt" 2>&1
    local status=$?
    cat "$out/reference.txt"
    [ "$status" = 0 ] || { echo "p2pBandwidthLatencyTest exit $status" >&2; exit 2; }
    echo "=== module: benchmarks/p2p_matrix.py"
    cd "$repo" || exit 2
    # shellcheck disable=SC2086
    python3 benchmarks/p2p_matrix.py --json "$out/module.json" ${P2P_MATRIX_ARGS:---no-torch --no-staged} \
        >"$out/module.txt" 2>&1
    status=$?
    cat "$out/module.txt"
    [ "$status" = 0 ] || { echo "p2p_matrix.py exit $status" >&2; exit 2; }
    echo "=== each latency method of the module on its own"
    python3 - "$out/methods.json" <<'PY' || echo "(the per-method table failed; the comparison below does not need it)"
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), ".collections"))
from ansible_collections.gpufleet.tuning.plugins.module_utils.p2p import cuda_driver, p2p_measure as pm, p2p_plan
cuda_driver.prefer_pci_bus_order()
drv = cuda_driver.Driver()
drv.init()
indices = list(range(drv.device_count()))
table = {}
for hold in (pm.LATENCY_WAIT_VALUE, pm.LATENCY_SPIN_KERNEL, pm.LATENCY_LAUNCH_INCLUDED):
    runner = pm.Runner(drv, dict(size_bytes=1 << 20, repetitions=1, warmup=2, staged=False, latency_iterations=100,
                                 streams=1, timeout_s=30.0, latency_hold=hold))
    try:
        for index in indices:
            runner.gpus[index] = pm.Gpu(drv, index, 1)
            runner.gpus[index].allocate(drv, 1 << 20)
        for a, b in p2p_plan.plan_pairs(indices):
            ga, gb = runner.gpus[a], runner.gpus[b]
            if not (drv.can_access_peer(ga.dev, gb.dev) and drv.can_access_peer(gb.dev, ga.dev)):
                continue
            runner._peer(ga, gb, True)
            try:
                for x, y in ((ga, gb), (gb, ga)):
                    us, method = runner.latency(x, y)
                    table.setdefault("%d->%d" % (x.index, y.index), {})[hold] = {"us": us, "method": method}
            finally:
                runner._peer(ga, gb, False)
    finally:
        runner._free_flag()
        for gpu in runner.gpus.values():
            gpu.release(drv)
print("%-8s %28s %28s %28s" % ("pair", "forced wait_value", "forced spin_kernel", "launch_included"))
for pair, row in sorted(table.items()):
    print("%-8s %s" % (pair, " ".join("%28s" % ("%.2f us (%s)" % (row[h]["us"], row[h]["method"]) if h in row else "-")
                                    for h in (pm.LATENCY_WAIT_VALUE, pm.LATENCY_SPIN_KERNEL, pm.LATENCY_LAUNCH_INCLUDED))))
json.dump(table, open(sys.argv[1], "w"), indent=2, sort_keys=True)
PY
    echo "=== comparison"
    python3 - "$out" "${P2P_REFERENCE_TOLERANCE:-0.10}" <<'PY'
import json, re, sys
out, tolerance = sys.argv[1], float(sys.argv[2])

def matrix(text, title):
    """The GPU rows of a latency matrix: {(src, dst): us}; the CPU matrix after it is left out."""
    lines = text.splitlines()
    start = [n for n, line in enumerate(lines) if line.startswith(title)]
    if not start:
        return {}
    header = lines[start[0] + 1].split()
    assert header[0] == "GPU", header
    cols = [int(c) for c in header[1:]]
    values = {}
    for line in lines[start[0] + 2:]:
        cells = line.split()
        if not cells or not re.match(r"^\d+$", cells[0]):
            break
        for col, cell in zip(cols, cells[1:]):
            values[(int(cells[0]), col)] = float(cell)
    return values

text = open(out + "/reference.txt").read()
enabled = matrix(text, "P2P=Enabled Latency (P2P Writes) Matrix (us)")
disabled = matrix(text, "P2P=Disabled Latency Matrix (us)")
devices = re.findall(r"^Device: (\d+), (.*?), pciBusID: (\w+), pciDeviceID: (\w+), pciDomainID:(\w+)", text, re.M)
json.dump({"devices": [{"index": int(i), "name": n, "pci_bus": b, "pci_domain": d} for i, n, b, _dev, d in devices],
           "p2p_enabled_latency_us": {"%d->%d" % k: v for k, v in sorted(enabled.items())},
           "p2p_disabled_latency_us": {"%d->%d" % k: v for k, v in sorted(disabled.items())}},
          open(out + "/reference.json", "w"), indent=2, sort_keys=True)
if not enabled:
    print("no 'P2P=Enabled Latency (P2P Writes) Matrix' in reference.txt")
    sys.exit(2)
module = json.load(open(out + "/module.json"))
print("%-8s %14s %14s %7s  %s" % ("pair", "reference us", "module us", "ratio", "module method"))
worst, failed, compared = 0.0, [], 0
for pair in module.get("pairs", []):
    key = (pair["src"], pair["dst"])
    ours, ref = pair.get("latency_p2p_us"), enabled.get(key)
    if ours is None or ref is None:
        print("%-8s %14s %14s %7s  %s" % ("%d->%d" % key, ref, ours, "-", pair.get("error") or "no P2P figure"))
        continue
    ratio = ours / ref if ref else float("inf")
    compared += 1
    worst = max(worst, ratio)
    flag = "  ABOVE" if ratio > 1 + tolerance else ""
    if flag:
        failed.append("%d->%d" % key)
    print("%-8s %14.2f %14.2f %7.3f  %s%s" % ("%d->%d" % key, ref, ours, ratio, pair.get("latency_method"), flag))
if compared == 0:
    print("no GPU pair with both figures")
    sys.exit(2)
print("worst ratio %.3f over %d ordered pair(s); allowed up to %.2f" % (worst, compared, 1 + tolerance))
if failed:
    print("FAIL: the module's P2P latency is more than %d %% above the reference on %s"
          % (round(tolerance * 100), ", ".join(failed)))
    sys.exit(1)
print("OK: within %d %% of p2pBandwidthLatencyTest on every pair" % round(tolerance * 100))
PY
}

case "${1:-}" in
    extract) [ $# = 3 ] || usage; extract "$2" "$3" ;;
    run) [ $# -ge 2 ] || usage; run "$2" "${3:-artifacts/p2p-reference}" ;;
    ""|-h|--help) usage ;;
    *) run "$1" "${2:-artifacts/p2p-reference}" ;;
esac

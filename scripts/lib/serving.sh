# shellcheck shell=bash
# The serving venv: llama-cpp-python's OpenAI-compatible server for tests/serving (a real
# inference server on a tiny random model). Sourced after scripts/lib/common.sh (REPO_ROOT,
# log, die, find_python, apt_install).
#
# PyPI has only llama-cpp-python's source: pip compiles llama.cpp (≈ 5 min on 2 cores). pip
# keeps the built wheel in its default cache, so a venv made again reuses it (≈ 45 s). That
# cache ignores CMAKE_ARGS: a wheel built once with other flags is reused silently.

# serving_build_tools: the compilers and build tools llama.cpp needs, installed with apt when
# missing. Debian 12: gcc and g++ (libgomp1 comes with them: ggml uses OpenMP, and the built
# library needs libgomp.so.1 at run time), cmake >= 3.21 and ninja (scikit-build-core would
# otherwise fetch both from PyPI). No python3-dev: llama-cpp-python loads llama.cpp through
# ctypes, it has no C extension.
serving_build_tools() {
    local missing=() tool
    for tool in gcc:gcc g++:g++ cmake:cmake ninja:ninja-build; do
        command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
    done
    if command -v dpkg-query >/dev/null 2>&1 &&
       ! dpkg-query -W -f='${Status}' libgomp1 2>/dev/null | grep -q "install ok installed"; then
        missing+=(libgomp1)
    fi
    [ ${#missing[@]} = 0 ] && return 0
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        log "installing ${missing[*]} (apt) to build llama.cpp"
        apt_install "${missing[@]}" || die "apt-get could not install ${missing[*]}"
    else
        die "building llama-cpp-python needs ${missing[*]} (Debian/Ubuntu: apt-get install ${missing[*]}, as root)"
    fi
}

# ensure_serving_venv [DIR]: create DIR (default $REPO_ROOT/.cache/venv-serving) from
# tests/serving/requirements.txt unless that same file was installed there already and the
# venv still imports llama_cpp and gguf (a venv outlives the Python it was made from).
ensure_serving_venv() {
    local dir="${1:-$REPO_ROOT/.cache/venv-serving}" requirements="$REPO_ROOT/tests/serving/requirements.txt"
    local stamp want python start
    stamp="$dir/.gpufleet-serving-requirements"
    want="$(sha256sum "$requirements" | cut -d' ' -f1)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$dir/bin/python" ] &&
       "$dir/bin/python" -c 'import llama_cpp, gguf' 2>/dev/null; then
        return 0
    fi
    start=$(date +%s)
    serving_build_tools
    python="$(find_python)" || { install_python_venv; python="$(find_python)" || die "no usable Python >= 3.11"; }
    log "creating $dir from $requirements (python: $python; compiling llama.cpp takes minutes unless pip's cache has the wheel)"
    rm -rf "$dir"
    "$python" -m venv "$dir"
    # pip stays the venv's own: another pip version may not find the wheel cached by this one.
    CMAKE_ARGS="-DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        "$dir/bin/python" -m pip install -q -r "$requirements" || die "pip could not install $requirements into $dir"
    "$dir/bin/python" -c 'import llama_cpp, gguf' || die "$dir: llama_cpp or gguf does not import"
    echo "$want" >"$stamp"
    log "serving venv ready in $(( $(date +%s) - start ))s"
}

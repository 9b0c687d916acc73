#!/usr/bin/env bash
# Builds vkasync's test binaries and examples for Windows (x86_64-pc-windows-gnu) and runs them
# under Wine, on the host's Vulkan driver (lavapipe in CI), and says what it does at each step.
#
#   scripts/windows-wine.sh            every test binary, then the examples
#   scripts/windows-wine.sh NAME...    only the named test binaries (e.g. `foundation`; the lib's
#                                      own unit tests are `vkasync`), no examples
#
# Any failing test binary or example makes it exit non-zero, naming which.
#
# How:
# - Packages (installed where missing, through sudo when not root): what the host build needs
#   (scripts/install-deps.sh: the Vulkan loader, lavapipe, the validation layer, shaderc, g++),
#   then gcc-mingw-w64-x86-64 (the linker for the target), wine and wine64 (Wine 8 on Debian 12),
#   xvfb and xauth; and the Rust target, with rustup.
# - The build leaves out the `spirv-validation` feature: it links SPIRV-Tools for the target,
#   and there is no mingw build of it here. `Kernel::from_spirv` and `Kernel::from_words` then
#   refuse every module with `Error::ValidationUnavailable`, which the tests check.
# - Rust's standard library imports `ProcessPrng` from bcryptprimitives.dll, which Wine 8 lacks:
#   a stand-in built from scripts/windows/bcryptprimitives.c goes beside each executable.
# - winevulkan needs Wine's X11 driver, which needs a display: each run is `xvfb-run -a wine`.
# - Wine's vulkan-1.dll offers the application none of the host's layers, so the tests open
#   their devices without the layer (`VKASYNC_TEST_NO_VALIDATION=1`, see tests/common/mod.rs)
#   and cannot count its messages. The host's loader still loads the layer when told so by the
#   environment (VK_INSTANCE_LAYERS): every run here has the Khronos validation layer, with
#   synchronization validation, forced in from the host side, writing its messages to the
#   run's standard output, and a run fails if the layer reported anything but the invalid host
#   signal that the device-loss tests make on purpose.
#
# The Wine prefix, the stand-in DLL and the logs go under the target directory
# ($CARGO_TARGET_DIR, else target/), in x86_64-pc-windows-gnu/wine/.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
say() { echo "windows-wine: $*"; }

target=x86_64-pc-windows-gnu
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi

# --- Packages ------------------------------------------------------------------------------
say "checking the host's packages (Vulkan loader, lavapipe, validation layer, shaderc)"
scripts/install-deps.sh
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
wine_packages=(gcc-mingw-w64-x86-64 wine wine64 xvfb xauth)
missing=()
if command -v dpkg-query >/dev/null; then
    for p in "${wine_packages[@]}"; do
        installed "$p" || missing+=("$p")
    done
else
    for c in x86_64-w64-mingw32-gcc wine wineserver xvfb-run xauth; do
        command -v "$c" >/dev/null || missing+=("$c")
    done
fi
if [ ${#missing[@]} -gt 0 ]; then
    if ! command -v apt-get >/dev/null; then
        echo "windows-wine: missing ${missing[*]}, and this is not a Debian/Ubuntu system:" >&2
        echo "install mingw-w64 (x86_64), Wine (64-bit), Xvfb and xauth by hand." >&2
        exit 1
    fi
    say "installing ${missing[*]} (apt-get)"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
    say "mingw-w64, Wine, Xvfb and xauth are installed"
fi
if ! rustup target list --installed | grep -qx "$target"; then
    say "adding the Rust target $target (rustup)"
    rustup target add "$target"
fi

# --- Paths ---------------------------------------------------------------------------------
target_dir="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target_dir"
target_dir="$(cd "$target_dir" && pwd)"
work="$target_dir/$target/wine"
logs="$work/logs"
mkdir -p "$work"
rm -rf "$logs"
mkdir -p "$logs"

# --- The bcryptprimitives.dll stand-in -----------------------------------------------------
stub="$work/bcryptprimitives.dll"
say "building the bcryptprimitives.dll stand-in (scripts/windows/bcryptprimitives.c) into $work"
x86_64-w64-mingw32-gcc -O2 -shared -o "$stub" scripts/windows/bcryptprimitives.c \
    scripts/windows/bcryptprimitives.def -ladvapi32

# --- Build ---------------------------------------------------------------------------------
say "building the test binaries and examples for $target (features: shaderc, crypto, trace; no spirv-validation)"
artifacts="$work/artifacts.json"
cargo build --target "$target" --no-default-features --features shaderc,crypto,trace --tests --examples \
    --message-format=json-render-diagnostics >"$artifacts"

# One "KIND NAME EXECUTABLE" line per executable that cargo built: KIND is test (an
# integration test), lib (the library's unit tests) or example.
executables() {
    local line kind name exe
    while IFS= read -r line; do
        case $line in
            *'"reason":"compiler-artifact"'*'"executable":"'*) ;;
            *) continue ;;
        esac
        exe=${line#*\"executable\":\"}
        exe=${exe%%\"*}
        kind=${line#*\"target\":\{\"kind\":\[\"}
        kind=${kind%%\"*}
        name=${line#*\"target\":\{}
        name=${name#*\"name\":\"}
        name=${name%%\"*}
        echo "$kind $name $exe"
    done <"$artifacts"
}
mapfile -t built < <(executables | sort -k1,1 -k2,2)
if [ ${#built[@]} -eq 0 ]; then
    echo "windows-wine: cargo reported no executables (see $artifacts)" >&2
    exit 1
fi
example_exe() {
    local kind name exe
    for entry in "${built[@]}"; do
        read -r kind name exe <<<"$entry"
        if [ "$kind" = example ] && [ "$name" = "$1" ]; then
            echo "$exe"
            return
        fi
    done
    echo "windows-wine: cargo built no example $1" >&2
    exit 1
}

# --- Wine ----------------------------------------------------------------------------------
export WINEPREFIX="$work/prefix"
export WINEARCH=win64
export WINEDEBUG=-all
# No prompts to install Wine's Mono or Gecko: nothing here needs them.
export WINEDLLOVERRIDES="mscoree,mshtml="
say "$(wine --version) with the prefix $WINEPREFIX"
# Stops the prefix's wineserver (and what it still runs) once a run is over. A wineserver
# outlives its last process by a few seconds, and one that was started under an earlier run's
# display (gone with that run's Xvfb) slows the exit of every process of the next run: each
# then ends only when the server kills it, a second after its exit (seen with Wine 8.0), which
# the exit-time tests of tests/shutdown.rs measure. So every run starts its own.
fresh_wineserver() { wineserver -k >/dev/null 2>&1 || true; }

# The prefix's wineserver, if this script started one, is stopped when it ends.
trap fresh_wineserver EXIT
if [ ! -f "$WINEPREFIX/system.reg" ]; then
    say "creating the Wine prefix (once, a few seconds)"
    xvfb-run -a wine wineboot --init >"$logs/wineboot.log" 2>&1
    wineserver -w
fi
fresh_wineserver

# The validation layer, forced in from the host side (see the top of this file). Older layers
# than 1.3.275 get what vkasync itself does for them (src/vk/instance.rs, src/vk/device.rs): their
# thread-safety checks off, and no compute copies by default.
layer_manifest=""
for d in "${XDG_CONFIG_HOME:-$HOME/.config}/vulkan" /etc/xdg/vulkan /etc/vulkan \
    "${XDG_DATA_HOME:-$HOME/.local/share}/vulkan" /usr/local/share/vulkan /usr/share/vulkan; do
    if [ -f "$d/explicit_layer.d/VkLayer_khronos_validation.json" ]; then
        layer_manifest="$d/explicit_layer.d/VkLayer_khronos_validation.json"
        break
    fi
done
if [ -z "$layer_manifest" ]; then
    echo "windows-wine: no VK_LAYER_KHRONOS_validation on the host (vulkan-validationlayers)" >&2
    exit 1
fi
layer_version=$(sed -n 's/.*"api_version": *"\([0-9.]*\)".*/\1/p' "$layer_manifest" | head -n 1)
settings="$work/vk_layer_settings.txt"
{
    echo "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG"
    echo "khronos_validation.report_flags = error,warn,perf"
    echo "khronos_validation.enables = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT"
} >"$settings"
validation_env=(VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation VK_LAYER_SETTINGS_PATH="$settings")
test_args=()
if [ "$(printf '%s\n' "$layer_version" 1.3.275 | sort -V | head -n 1)" != 1.3.275 ]; then
    echo "khronos_validation.disables = VK_VALIDATION_FEATURE_DISABLE_THREAD_SAFETY_EXT" >>"$settings"
    validation_env+=(VKASYNC_COMPUTE_COPIES=0)
    # Such a layer also races with device creation on other threads (see
    # `racy_validation_layer` in xtask/src/main.rs): one test at a time, as `cargo xtask test` does.
    test_args=(--test-threads=1)
    say "host validation layer $layer_version (older than 1.3.275: thread-safety checks and compute copies off, one test at a time)"
else
    say "host validation layer $layer_version"
fi
# A layer message's first line: "<id>(<severity> / <type>): msgNum: ...".
message_pattern='): msgNum: '
# The one message that tests make on purpose (as `assert_only_intended_validation_messages`).
intended_pattern='VkSemaphoreSignalInfo|vkSignalSemaphore|Tried to signal a timeline'

# Runs one Windows executable (its arguments after the label) under Wine, with the stand-in
# beside it, the test environment and the host's validation layer; its output goes to the
# console and to $logs/LABEL.log. Returns the program's exit status, or 1 when it exited 0 but
# the layer reported something not intended.
failures=()
run() {
    local label=$1 exe=$2 log="$logs/$1.log" rc unexpected
    shift 2
    cp -f "$stub" "$(dirname "$exe")/"
    say "running $label: wine $(basename "$exe") $*"
    if env "${validation_env[@]}" VKASYNC_TEST_NO_VALIDATION=1 \
        timeout --kill-after=15 600 xvfb-run -a wine "$exe" "$@" 2>&1 | tee "$log"; then
        rc=0
    else
        rc=$?
    fi
    fresh_wineserver
    unexpected=$(grep -F -- "$message_pattern" "$log" | grep -Ev -- "$intended_pattern" || true)
    if [ -n "$unexpected" ]; then
        echo "windows-wine: the validation layer reported, in $label:" >&2
        echo "$unexpected" >&2
        [ "$rc" -ne 0 ] || rc=1
    fi
    if [ "$rc" -ne 0 ]; then
        say "FAILED: $label (exit status $rc; log: $log)"
        failures+=("$label")
    fi
    return 0
}
# "passed" counts of the test harness's summaries in a log.
passed_in() { sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$logs/$1.log" | awk '{s += $1} END {print s + 0}'; }

# --- What Wine sees ------------------------------------------------------------------------
run devices "$(example_exe devices)"

# --- Test binaries -------------------------------------------------------------------------
# missing_device is not run: its last check sets VK_DRIVER_FILES inside the process to hide
# every driver, and under Wine the host's loader (behind winevulkan) reads the environment the
# process started with, so it still finds lavapipe. On Windows itself the loader reads the
# process's own environment.
skipped=(missing_device)
# shutdown runs one test per process. Several of its tests leave GPU work running on purpose
# (what a shutdown bound leaks), and its exit tests time child processes. Wine's server kills a
# process whose Unix side has not ended within a second of its exit (SIGKILL: exit status 137
# here, and a child's exit timed at one second); with Wine 8.0 and lavapipe (Mesa 22.3) a
# process in which several of these tests leaked work ends that way, after all its tests
# passed. In a process of its own each test passes and its process ends normally.
one_per_process=(shutdown)
declare -A summary
ran_tests=0
for entry in "${built[@]}"; do
    read -r kind name exe <<<"$entry"
    [ "$kind" = test ] || [ "$kind" = lib ] || continue
    if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx -- "$name"; then
        continue
    fi
    if printf '%s\n' "${skipped[@]}" | grep -qx -- "$name"; then
        say "not running $name under Wine (see this script)"
        continue
    fi
    label=$name
    [ "$kind" = lib ] && label="$name-unittests"
    if printf '%s\n' "${one_per_process[@]}" | grep -qx -- "$name"; then
        cp -f "$stub" "$(dirname "$exe")/"
        mapfile -t tests < <(xvfb-run -a wine "$exe" --list --format terse 2>/dev/null |
            sed -n 's/^\(.*\): test\r\{0,1\}$/\1/p')
        fresh_wineserver
        if [ ${#tests[@]} -eq 0 ]; then
            say "FAILED: $label lists no tests"
            failures+=("$label")
            continue
        fi
        n=0
        for t in "${tests[@]}"; do
            run "$label.$t" "$exe" "$t" --exact
            n=$((n + $(passed_in "$label.$t")))
        done
        summary[$label]="$n passed (one process per test)"
        ran_tests=$((ran_tests + n))
    else
        run "$label" "$exe" ${test_args[@]+"${test_args[@]}"}
        n=$(passed_in "$label")
        summary[$label]="$n passed"
        ran_tests=$((ran_tests + n))
    fi
done
# The layer really ran: foundation's `validation_layer_messages_are_counted` makes the invalid
# host signal on purpose, which the layer must have reported.
if [ -f "$logs/foundation.log" ] && ! grep -F -- "$message_pattern" "$logs/foundation.log" | grep -Eq -- "$intended_pattern"; then
    say "FAILED: the host's validation layer reported nothing in foundation, where a test signals invalidly on purpose"
    failures+=("host validation layer")
fi

# --- Examples ------------------------------------------------------------------------------
if [ $# -eq 0 ]; then
    run example-tokio_jobs "$(example_exe tokio_jobs)" 200
    run example-tls_pipeline "$(example_exe tls_pipeline)" --connections 64 --records 2 --reps 1 \
        --modes blocking,waits-only,coalesced,coalesced-tokio,staged,staged-tokio,auto,auto-tokio,cpu-1,cpu-all,coalesced-tokio-set,staged-tokio-set
fi

# --- Summary -------------------------------------------------------------------------------
say "summary:"
for label in $(printf '%s\n' "${!summary[@]}" | sort); do
    echo "  $label: ${summary[$label]}"
done
say "$ran_tests tests passed in total; $((SECONDS - started)) s"
if [ ${#failures[@]} -gt 0 ]; then
    say "FAILED: ${failures[*]}" >&2
    exit 1
fi
say "all passed"

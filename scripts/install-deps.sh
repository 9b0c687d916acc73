#!/usr/bin/env bash
# Installs what vkasync needs on Debian/Ubuntu, and says what it does. Installs only what is
# missing; safe to run again.
#   mesa-vulkan-drivers     lavapipe (a CPU Vulkan device) and the Vulkan loader (libvulkan1)
#   vulkan-validationlayers VK_LAYER_KHRONOS_validation, which the test suite turns on
#   libshaderc-dev          shaderc, which the `shaderc` crate links to compile shaders/ at build
#                           time (it brings glslang-dev and spirv-tools, whose archives are linked
#                           beside it, SPIRV-Tools also for run-time validation)
#   g++                     libstdc++, which shaderc, glslang and SPIRV-Tools need
#   pkg-config              how the build finds the system's shaderc
# Where the release packages no libshaderc-dev (Ubuntu 22.04), it installs what building shaderc
# from source needs instead (cmake, make, git, python3, g++); the first build then takes several
# minutes longer.
set -euo pipefail

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers g++ pkg-config)
missing=()
for p in "${packages[@]}"; do
    installed "$p" || missing+=("$p")
done
shaderc_missing=0
if ! installed libshaderc-dev && ! { installed cmake && installed make && installed git && installed python3; }; then
    shaderc_missing=1
fi
if [ ${#missing[@]} -eq 0 ] && [ $shaderc_missing -eq 0 ]; then
    echo "vkasync: system packages present (Vulkan loader, lavapipe, validation layer, shaderc, g++, pkg-config)."
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    [ $shaderc_missing -eq 1 ] && missing+=("shaderc")
    echo "vkasync: missing ${missing[*]}, and this is not a Debian/Ubuntu" >&2
    echo "system: install the equivalents (Vulkan loader + a driver, the Khronos validation layer," >&2
    echo "shaderc with glslang and SPIRV-Tools, or cmake, git and python3 to build it) by hand." >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
echo "vkasync: updating the package lists (apt-get update)..."
$sudo apt-get update -qq
if [ $shaderc_missing -eq 1 ]; then
    if apt-cache show libshaderc-dev >/dev/null 2>&1; then
        missing+=(libshaderc-dev)
    else
        echo "vkasync: this release packages no libshaderc-dev; installing cmake, make, git and python3 so"
        echo "vkasync: that the shaderc crate builds shaderc from source (several minutes, once)."
        missing+=(cmake make git python3)
    fi
fi
echo "vkasync: installing ${missing[*]} with apt-get (Vulkan loader, lavapipe, validation layer, shaderc, g++, pkg-config)..."
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "vkasync: system packages installed."

#!/usr/bin/env bash
# Installs what vkasync needs on Debian/Ubuntu, and says what it does. Installs only what is
# missing; safe to run again.
#   mesa-vulkan-drivers     lavapipe (a CPU Vulkan device) and the Vulkan loader (libvulkan1)
#   vulkan-validationlayers VK_LAYER_KHRONOS_validation, which the test suite turns on
#   glslc spirv-tools       shaderc's compiler and SPIRV-Tools (spirv-val, spirv-opt), run by the
#                           build on shaders/ (spirv-tools also ships libSPIRV-Tools.a, linked for
#                           run-time validation). Ubuntu 22.04 packages no glslc: there
#                           glslang-tools (glslangValidator) takes its place.
#   g++                     libstdc++, which SPIRV-Tools needs
set -euo pipefail

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers spirv-tools g++)
missing=()
for p in "${packages[@]}"; do
    installed "$p" || missing+=("$p")
done
# The GLSL compiler: glslc, or glslang-tools where that is what the release packages.
compiler_missing=0
if ! installed glslc && ! installed glslang-tools; then
    compiler_missing=1
fi
if [ ${#missing[@]} -eq 0 ] && [ $compiler_missing -eq 0 ]; then
    echo "vkasync: system packages present (Vulkan loader, lavapipe, validation layer, GLSL compiler, SPIRV-Tools)."
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    [ $compiler_missing -eq 1 ] && missing+=("a GLSL compiler")
    echo "vkasync: missing ${missing[*]}, and this is not a Debian/Ubuntu" >&2
    echo "system: install the equivalents (Vulkan loader + a driver, the Khronos validation layer, glslc" >&2
    echo "or glslangValidator, and SPIRV-Tools) by hand." >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
echo "vkasync: updating the package lists (apt-get update)..."
$sudo apt-get update -qq
if [ $compiler_missing -eq 1 ]; then
    if apt-cache show glslc >/dev/null 2>&1; then
        missing+=(glslc)
    else
        echo "vkasync: this release packages no glslc; using glslang-tools (glslangValidator) instead."
        missing+=(glslang-tools)
    fi
fi
echo "vkasync: installing ${missing[*]} with apt-get (Vulkan loader, lavapipe, validation layer, GLSL compiler, SPIRV-Tools)..."
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "vkasync: system packages installed."

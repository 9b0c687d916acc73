#!/usr/bin/env bash
# Installs what vkasync needs on Debian/Ubuntu, and says what it does. Installs only what is
# missing; safe to run again.
#   mesa-vulkan-drivers     lavapipe (a CPU Vulkan device) and the Vulkan loader (libvulkan1)
#   vulkan-validationlayers VK_LAYER_KHRONOS_validation, which the test suite turns on
#   glslc spirv-tools       shaderc's compiler and SPIRV-Tools' validator, run by build.rs on shaders/
#                           (spirv-tools also ships libSPIRV-Tools.a, linked for run-time validation)
#   g++                     libstdc++, which SPIRV-Tools needs
set -euo pipefail

packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers glslc spirv-tools g++)
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "vkasync: system packages present (Vulkan loader, lavapipe, validation layer, glslc, SPIRV-Tools)."
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "vkasync: missing ${missing[*]}, and this is not a Debian/Ubuntu system: install the" >&2
    echo "equivalents (Vulkan loader + a driver, the Khronos validation layer, glslc and SPIRV-Tools) by hand." >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
echo "vkasync: installing ${missing[*]} with apt-get (Vulkan loader, lavapipe, validation layer, glslc, SPIRV-Tools)..."
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "vkasync: system packages installed."

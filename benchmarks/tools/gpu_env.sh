# Sourced by the GPU scripts: the NVIDIA ICD where it is installed (see `../shared/GPU.md`), and
# `clocks_start FILE`, which samples the SM clock every 50 ms into FILE in the background and sets
# `clocks` to the sampler's pid (empty where there is no `nvidia-smi`).
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES=$icd
clocks_start() {
    clocks=""
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=timestamp,clocks.sm,utilization.gpu --format=csv -lms 50 > "$1" 2>&1 &
        clocks=$!
    fi
}

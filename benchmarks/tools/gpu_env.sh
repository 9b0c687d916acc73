# Sourced by the GPU scripts (from the repository root): the Vulkan loader and the NVIDIA ICD where
# they are carried or installed (see `../shared/GPU.md`), and
# `clocks_start FILE`, which samples the SM clock every 50 ms into FILE in the background and sets
# `clocks` to the sampler's pid (empty where there is no `nvidia-smi`); `host_describe`, which
# prints what tells one host from another: its CPU model and topology (`lscpu`), its NUMA nodes,
# the CPU quota of its cgroup, and the governor, where the host shows them.
# The Vulkan loader, as GPU.md describes: unpacked from the `.deb`s carried in `.gl` (skipped
# where there are none).
if ls .gl/*.deb > /dev/null 2>&1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES=$icd
clocks_start() {
    clocks=""
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=timestamp,clocks.sm,utilization.gpu --format=csv -lms 50 > "$1" 2>&1 &
        clocks=$!
    fi
}
host_describe() {
    date -u
    nproc
    uname -r
    command -v lscpu > /dev/null && lscpu | grep -E '^(Model name|Socket|Core|Thread|NUMA|CPU\(s\)|CPU max MHz|L3|Hypervisor)'
    grep -m1 'model name' /proc/cpuinfo
    for f in /sys/fs/cgroup/cpu.max /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor; do
        [ -r "$f" ] && echo "$f: $(cat "$f")"
    done
    ls -d /sys/devices/system/node/node* 2> /dev/null | wc -l | sed 's/^/NUMA nodes in sysfs: /'
    return 0
}

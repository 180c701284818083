#!/bin/bash
# mps.sh BUNDLE_DIR OUT: driver_costs (its ping-pong floors) and 2-rank device latency
# on the bundle's Open MPI 4.1, plainly and under the CUDA MPS daemon when the machine
# has it (two processes' work then shares one GPU context: no time-slicing between them).
b=$1; out=$2
export OPAL_PREFIX=$b/prefix PMIX_INSTALL_PREFIX=$b/prefix PATH=$b/prefix/bin:$PATH
export LD_LIBRARY_PATH=$b/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
job() {
    local name=$1 btl=$2 path=$b/prefix/lib/openmpi
    shift 2
    [ "$btl" = rsmcuda ] && path=$b/rsmcuda:$path
    OMPI_MCA_mca_base_component_path=$path timeout 120 mpirun --allow-run-as-root \
        --oversubscribe --mca pml ob1 -np 2 --mca btl "self,$btl" "$@" > "$out/$name.txt" 2>&1
    echo "$name: exit $? $(tail -n 1 "$out/$name.txt")"
}
lat=(--parts=lat --lat-sizes=8,4K,64K,1M --lat-iters=1000)
job driver_costs smcuda "$b/programs/driver_costs" --iters=300
job latency-rsmcuda rsmcuda "$b/programs/device_bw" "${lat[@]}"
mps=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null)
echo "mps control: ${mps:-none}"
[ -n "$mps" ] || exit 0
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
"$mps" -d && sleep 2
job mps-driver_costs smcuda "$b/programs/driver_costs" --iters=300
job mps-latency-rsmcuda rsmcuda "$b/programs/device_bw" "${lat[@]}"
job mps-latency-smcuda smcuda "$b/programs/device_bw" "${lat[@]}"
echo quit | "$mps"
sleep 1
cat "$CUDA_MPS_LOG_DIRECTORY"/* > "$out/mps-log.txt" 2>&1

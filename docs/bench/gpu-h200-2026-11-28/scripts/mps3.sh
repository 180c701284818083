#!/bin/bash
# mps3.sh BUNDLE_DIR OUT: under the CUDA MPS daemon, 3 interleaved rounds of 2-rank
# device latency by size on Open MPI 4.1 and 5.0: rsmcuda as it comes (every device
# message by CUDA IPC rendezvous since 2026-11-28), rsmcuda with its GPU eager limit 0
# (device messages up to its eager limit staged through host memory by ob1's convertor,
# as before), and smcuda; then device bandwidth for rsmcuda and smcuda.
b=$1; out=$2
mps=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null)
[ -n "$mps" ] || { echo "no MPS control"; exit 1; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
"$mps" -d && sleep 2
user_ld=$LD_LIBRARY_PATH
job() {
    local series=$1 name=$2 btl=$3 pre=$b/prefix progs=$b/programs comp=$b/rsmcuda
    shift 3
    if [ "$series" = 5.0 ]; then pre=$b/prefix5; progs=$b/programs5; comp=$b/rsmcuda5; fi
    local path=$pre/lib/openmpi
    [ "$btl" = rsmcuda ] && path=$comp:$path
    env OPAL_PREFIX=$pre PMIX_INSTALL_PREFIX=$pre PRTE_PREFIX=$pre PMIX_PREFIX=$pre \
        PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib${user_ld:+:$user_ld} \
        OMPI_MCA_mca_base_component_path=$path \
        timeout 120 "$pre/bin/mpirun" --allow-run-as-root --oversubscribe --mca pml ob1 \
        -np 2 --mca btl "self,$btl" "$progs/$1" "${@:2}" > "$out/$name.txt" 2>&1
    echo "$name: exit $? $(tail -n 1 "$out/$name.txt")"
}
lat=(--parts=lat --lat-sizes=8,64,512,4K,16K,64K,256K,1M,4M --lat-iters=2000)
for series in 4.1 5.0; do
    s=${series/./}
    for round in 1 2 3; do
        job $series "lat-$s-rsmcuda-r$round" rsmcuda device_bw "${lat[@]}"
        OMPI_MCA_btl_rsmcuda_cuda_eager_limit=0 \
            OMPI_MCA_btl_rsmcuda_accelerator_eager_limit=0 \
            job $series "lat-$s-rsmcuda-staged-r$round" rsmcuda device_bw "${lat[@]}"
        job $series "lat-$s-smcuda-r$round" smcuda device_bw "${lat[@]}"
    done
    job $series "bw-$s-rsmcuda" rsmcuda device_bw --parts=dtod,mpi --quick
    job $series "bw-$s-smcuda" smcuda device_bw --parts=dtod,mpi --quick
done
echo quit | "$mps"

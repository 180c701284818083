#!/bin/bash
# release.sh: tests/cuda/malloc_bcast_free (the loop of ompi#12971) on a real GPU, for
# rsmcuda with its owner-side release notices (2ebb431) against stock smcuda, on the
# bundle's Open MPI 4.1.4 and 5.0.7, 4 ranks, 1000 iterations, --uses=2 --spread=3 and
# --uses=1 --spread=3, under the CUDA MPS daemon (as the earlier runs of the day; without
# MPS when the machine has no nvidia-cuda-mps-control). Every byte is checked by the
# program; it prints the device's free memory (cuMemGetInfo) after the first and the
# last iteration; finalize_pvars.c, linked in, prints rsmcuda's IPC pvars summed over
# the job.
#
#   release.sh --build DIR    here: DIR gets build/gpu-bundle's bundle (make gpu-bundle
#                             first) and malloc_bcast_free41 / 50, built with each
#                             series' mpicc against the stand-in's libcuda.so (soname only)
#   release.sh DIR OUT        on the GPU machine: unpacks DIR's bundle in /tmp, runs the
#                             8 jobs, writes OUT/summary.txt and OUT/release-jobs.tar.gz
#                             (every job's output, nvidia-smi, the MPS log)
#
# Dry run here (stand-in, no MPS; the program then prints the stand-in's counts):
#   LD_LIBRARY_PATH=build/cuda-standin RMCA_CUDA_STANDIN=1 ITERATIONS=50 release.sh DIR OUT
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = --build ]; then
    set -e
    dir=$2 root=$(cd "$here/../../../.." && pwd)
    mkdir -p "$dir"
    p4=$(cd "$root" && make -s ompi-cuda-prefix)
    p5=$("$root/configure-support/ompi5" --print-prefix)
    cf=(-O2 -g -Wall -Wextra -Werror -I "$root/tests/programs" -I "$(dirname "$p4")/cuda/include")
    for s in 41:$p4 50:$p5; do
        "${s#*:}/bin/mpicc" "${cf[@]}" -o "$dir/malloc_bcast_free${s%%:*}" \
            "$root/tests/cuda/malloc_bcast_free.c" "$here/finalize_pvars.c" \
            -L "$root/build/cuda-standin" -lcuda
    done
    cp "$root/build/gpu-bundle/rmca-gpu-bundle.tar.xz" "$dir/"
    ls -l "$dir"
    exit 0
fi
dir=$(cd "$1" && pwd) out=$2
iterations=${ITERATIONS:-1000}
jobs=/tmp/release-jobs
rm -rf /tmp/rmca-gpu-bundle "$jobs"
mkdir -p "$jobs" "$out"
tar xf "$dir/rmca-gpu-bundle.tar.xz" -C /tmp || exit 1
b=/tmp/rmca-gpu-bundle
summary=$out/summary.txt
say() { echo "$*" | tee -a "$summary"; }
pack() { tar czf "$out/release-jobs.tar.gz" -C /tmp release-jobs; }
say "release.sh $(date -u '+%F %T') UTC; iterations $iterations; $(head -n 3 "$b/BUILD-INFO.txt" | tail -n 1)"
nvidia-smi > "$jobs/nvidia-smi-before.txt" 2>&1
say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv,noheader 2>&1 | head -n 1)"
mps=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null)
if [ -n "$mps" ] && [ -z "${RMCA_CUDA_STANDIN:-}" ]; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    "$mps" -d && sleep 2
    say "MPS: $mps started"
else
    mps=
    say "MPS: none (jobs without it)"
fi
user_ld=${LD_LIBRARY_PATH:-}
start=$(date +%s)
job() { # job SERIES BTL USES SPREAD
    local series=$1 btl=$2 uses=$3 spread=$4 pre=$b/prefix prog=$dir/malloc_bcast_free41 comp=$b/rsmcuda
    if [ "$series" = 5.0 ]; then pre=$b/prefix5; prog=$dir/malloc_bcast_free50; comp=$b/rsmcuda5; fi
    local name=${series/./}-$btl-uses$uses-spread$spread path=$pre/lib/openmpi
    [ "$btl" = rsmcuda ] && path=$comp:$path
    if [ $(( $(date +%s) - start )) -gt 130 ]; then say "$name: skipped (out of time)"; return; fi
    local t0 t1 rc
    t0=$(date +%s.%N)
    env OPAL_PREFIX=$pre PMIX_INSTALL_PREFIX=$pre PRTE_PREFIX=$pre PMIX_PREFIX=$pre \
        PATH=$pre/bin:$PATH LD_LIBRARY_PATH=$pre/lib${user_ld:+:$user_ld} \
        OMPI_MCA_mca_base_component_path=$path \
        timeout 55 "$pre/bin/mpirun" --allow-run-as-root --oversubscribe --mca pml ob1 \
        -np 4 --mca btl "self,$btl" "$prog" --iterations="$iterations" --uses="$uses" \
        --spread="$spread" > "$jobs/$name.txt" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    say "== $name: exit $rc, $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s"
    grep -a -E "^malloc_bcast_free|passed|FAIL|^pvars:" "$jobs/$name.txt" | head -n 12 | tee -a "$summary"
    pack
}
for series in 4.1 5.0; do
    for uses in 2 1; do
        job $series rsmcuda $uses 3
        job $series smcuda $uses 3
    done
done
nvidia-smi > "$jobs/nvidia-smi-after.txt" 2>&1
if [ -n "$mps" ]; then
    echo quit | "$mps"
    sleep 1
    cat "$CUDA_MPS_LOG_DIRECTORY"/* > "$jobs/mps-log.txt" 2>&1
fi
say "done in $(( $(date +%s) - start )) s"
pack

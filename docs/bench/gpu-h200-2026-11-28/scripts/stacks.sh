#!/bin/bash
# stacks.sh BUNDLE_DIR OUT: where a rank of an 8-byte device ping-pong spends its time
# (stack samples with cuda-gdb), rsmcuda and smcuda on the bundle's Open MPI 4.1.
b=$1; out=$2
export OPAL_PREFIX=$b/prefix PMIX_INSTALL_PREFIX=$b/prefix PATH=$b/prefix/bin:$PATH
export LD_LIBRARY_PATH=$b/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
GDB=$(command -v cuda-gdb || ls /usr/local/cuda*/bin/cuda-gdb 2>/dev/null | head -n 1 || true)
[ -n "$GDB" ] || GDB=$(command -v gdb)
{ nproc; lscpu | head -n 25; } > "$out/cpu.txt" 2>&1
echo "gdb: $GDB" >> "$out/cpu.txt"
for btl in rsmcuda smcuda; do
    path=$b/prefix/lib/openmpi
    [ "$btl" = rsmcuda ] && path=$b/rsmcuda:$path
    OMPI_MCA_mca_base_component_path=$path timeout 90 mpirun --allow-run-as-root \
        --oversubscribe --mca pml ob1 -np 2 --mca btl "self,$btl" --report-bindings \
        "$b/programs/device_bw" --parts=lat --lat-sizes=8 --lat-iters=60000 \
        > "$out/lat-$btl.txt" 2>&1 &
    sleep 5
    pids=$(pgrep -x device_bw | tr '\n' ' ')
    echo "pids: $pids" > "$out/stacks-$btl.txt"
    for i in 1 2 3 4 5 6 7 8 9 10; do
        for pid in $pids; do
            echo "==== sample $i pid $pid"
            timeout 20 "$GDB" -batch -p "$pid" -ex "thread apply all bt 14" 2>&1 \
                | grep -E "^#|^Thread"
        done
    done >> "$out/stacks-$btl.txt"
    wait
done

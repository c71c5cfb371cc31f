#!/usr/bin/env bash
# hetrain under a launcher of another MPI than the one it was built with: every process sees a
# world of 1 and would train alone; hetrain must say so (a warning naming the launcher's rank
# count and the MPI it was built with), and must not under its own MPI's launcher. Runs with
# each of Open MPI's and MPICH's launchers that is installed. Env: HETRAIN.
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
lib=$(ldd "$HETRAIN" | grep -Eo 'libmpich|libmpi\.so' | head -1 | sed 's/libmpich/mpich/; s/libmpi.so/openmpi/')
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ran=0
for launcher in mpirun.openmpi mpiexec.mpich; do
    command -v $launcher >/dev/null 2>&1 || continue
    ran=1
    out=$(timeout 60 $launcher -np 2 "$HETRAIN" info --model mlp 2>&1)
    n=$(echo "$out" | grep -c 'warning: the launcher started 2 ranks .* but MPI sees 1')
    case "$launcher:$lib" in
        mpirun.openmpi:openmpi | mpiexec.mpich:mpich)
            [ "$n" -eq 0 ] || fail "$launcher with its own MPI warned: $out"
            [ "$(echo "$out" | grep -c '^parameters: ')" -eq 1 ] || fail "$launcher: printed not once (one world of 2): $out" ;;
        *)
            [ "$n" -eq 2 ] || fail "$launcher with hetrain built on $lib: $n warnings (expected 2): $out" ;;
    esac
done
[ $ran -eq 1 ] || { echo "FAIL: no launcher found (mpirun.openmpi, mpiexec.mpich)" >&2; exit 1; }
[ $failures -eq 0 ] && echo "test_launcher: passed ($lib build)" || exit 1

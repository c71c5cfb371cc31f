# Sourced by the multi-rank tests: how to start P ranks with the MPI this build uses.
# CMake passes the launcher it found with the MPI it built against (MPIEXEC_EXECUTABLE,
# MPIEXEC_NUMPROC_FLAG, MPIEXEC_PREFLAGS) as HET_MPIEXEC, HET_MPIEXEC_NUMPROC_FLAG and
# HET_MPIEXEC_PREFLAGS; run by hand, mpirun from PATH. Nothing here is Open MPI's only:
# oversubscription and root go through OMPI_* variables, which other MPIs ignore.
#   het_mpi_found        whether the launcher exists
#   het_mpi_np_ok P      whether P ranks can run here (MPICH busy-polls: ranks <= cores)
#   het_mpirun P CMD...  P ranks of CMD under `timeout ${HET_MPI_TIMEOUT:-120}`, with
#                        HET_TEST_NP=P in their environment: a C test checks that its world
#                        has P ranks (a launcher of another MPI starts P singletons)
#   het_mpi_each NAME BIN P...  BIN (a C test program) on each rank count P the machine allows
#                        (het_mpi_np_ok; the others are named as skipped), a FAIL line per
#                        count that fails; returns 1 if any failed
#   het_mpirun_bg P CMD...  the same in the background, its pid in het_mpi_pid: timeout's,
#                        which passes SIGTERM / SIGINT on to the launcher (a backgrounded
#                        function would be a subshell that does not)
HET_MPIEXEC=${HET_MPIEXEC:-mpirun}
HET_MPIEXEC_NUMPROC_FLAG=${HET_MPIEXEC_NUMPROC_FLAG:--np}
read -r -a het_mpi_pre <<<"${HET_MPIEXEC_PREFLAGS:-}"
export HET_MPIEXEC
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
case "$("$HET_MPIEXEC" --version 2>&1 | head -5)" in
    *"Open MPI"* | *OpenRTE*) het_mpi_flavor=openmpi ;;
    *HYDRA* | *MPICH* | *mpich*) het_mpi_flavor=mpich ;;
    *) het_mpi_flavor=other ;;
esac
het_mpi_found() { command -v "$HET_MPIEXEC" >/dev/null 2>&1; }
het_mpi_np_ok() { [ "$het_mpi_flavor" != mpich ] || [ "$1" -le "$(nproc)" ]; }
het_mpirun() {
    local p=$1; shift
    HET_TEST_NP=$p timeout -k 5 "${HET_MPI_TIMEOUT:-120}" \
        "$HET_MPIEXEC" "$HET_MPIEXEC_NUMPROC_FLAG" "$p" "${het_mpi_pre[@]}" "$@"
}
het_mpirun_bg() {
    local p=$1; shift
    HET_TEST_NP=$p timeout -k 5 "${HET_MPI_TIMEOUT:-120}" \
        "$HET_MPIEXEC" "$HET_MPIEXEC_NUMPROC_FLAG" "$p" "${het_mpi_pre[@]}" "$@" &
    het_mpi_pid=$!
}
het_mpi_each() {
    local name=$1 bin=$2 np fail=0
    shift 2
    [ -x "$bin" ] || { echo "FAIL: $bin not built" >&2; return 1; }
    for np in "$@"; do
        het_mpi_np_ok "$np" ||
            { echo "$name: $np ranks skipped (more than the cores, $het_mpi_flavor)"; continue; }
        het_mpirun "$np" "$bin" || { echo "FAIL: $name on $np ranks: exit $?" >&2; fail=1; }
    done
    return $fail
}

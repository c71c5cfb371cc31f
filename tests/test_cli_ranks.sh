#!/usr/bin/env bash
# Until the strategies exist, hetrain refuses to run on more than one MPI rank: one message
# from rank 0, non-zero exit. Skipped (passes) when mpirun is not installed.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! command -v mpirun >/dev/null 2>&1; then
    echo "test_cli_ranks: mpirun not found, skipped"
    exit 0
fi
T=$(mktemp -d /tmp/het_cli_ranks_XXXXXX)
trap 'rm -rf "$T"' EXIT
timeout 60 mpirun -np 2 --oversubscribe "$HETRAIN" info --model mlp --data synthetic \
    >"$T/out" 2>"$T/err"
rc=$?
n=$(grep -c 'multi-rank strategies are not built yet' "$T/err")
if [ $rc -eq 0 ] || [ "$n" -ne 1 ] || [ -s "$T/out" ]; then
    echo "FAIL: mpirun -np 2 hetrain: rc $rc, $n refusal lines, stdout: $(cat "$T/out")" >&2
    cat "$T/err" >&2
    exit 1
fi
echo "test_cli_ranks: passed"

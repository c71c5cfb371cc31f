#!/usr/bin/env bash
# The datasets held once per host (src/train/shared_data.c) through the command line, 4 ranks
# under mpirun on this one machine: the shared copy trains to bitwise the weights and test loss
# of private copies (HET_SHARED_DATA=0); the memory lines (start: the dataset per host and per
# rank; end: peak RSS max and sum, the proportional set sum) and the metrics count one copy per
# host; the proportional sets show it: with IDX files of 14 MB, 4 private copies hold at least
# 2 copies more than the shared one; a corrupt data file ends every rank with exit status 1 and
# one line, no hang.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found (the launcher of the MPI this build uses)" >&2; exit 1; }
het_mpi_np_ok 4 || { echo "test_cli_shared: skipped (4 ranks, more than the cores, $het_mpi_flavor)"; exit 77; }
T=$(mktemp -d /tmp/het_cli_shared_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
unset HET_SHARED_DATA
mpi() { HET_MPI_TIMEOUT=120 het_mpirun 4 "$HETRAIN" train "$@"; }
# the number of a metrics field in the last epoch line: field FILE KEY
field() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"$2\":\([-0-9]*\).*/\1/p"; }
O=(--model lenet5 --data synthetic --train-limit 512 --test-limit 256 --epochs 1 --seed 7
   --progress off)

# ---- shared == private, bitwise; the memory lines and fields ----
mpi "${O[@]}" --export-safetensors s.st --metrics s.jsonl >s.out 2>s.err || fail "shared run: $(cat s.err)"
HET_SHARED_DATA=0 mpi "${O[@]}" --export-safetensors p.st --metrics p.jsonl >p.out 2>p.err ||
    fail "private run: $(cat p.err)"
cmp -s s.st p.st || fail "weights differ between the shared and the private datasets"
ls=$(sed -n 's/^done: .*test_loss \([0-9.]*\).*/\1/p' s.out)
lp=$(sed -n 's/^done: .*test_loss \([0-9.]*\).*/\1/p' p.out)
[ -n "$ls" ] && [ "$ls" = "$lp" ] || fail "test_loss shared '$ls', private '$lp'"
grep -q '^memory: dataset 2.01 MB decoded (train + test), held once per host in shared memory: 1 copy for 4 ranks on 1 host, 0.502 MB per rank$' s.out ||
    fail "shared start line: $(grep '^memory' s.out)"
grep -q '^memory: dataset 2.01 MB decoded (train + test), 4 copies for 4 ranks on 1 host (HET_SHARED_DATA=0), 8.04 MB in all$' p.out ||
    fail "private start line: $(grep '^memory' p.out)"
grep -Eq '^memory: peak RSS per rank max [0-9.]+ MB, sum [0-9.]+ MB over 4 ranks, proportional set sum [0-9.]+ MB; dataset 2.01 MB shared per host \(1 copy\)$' s.out ||
    fail "shared end line: $(grep '^memory' s.out)"
grep -Eq '^memory: peak RSS per rank max .* over 4 ranks.*; dataset 2.01 MB per rank \(4 copies\)$' p.out ||
    fail "private end line: $(grep '^memory' p.out)"
[ "$(grep -c '^memory: ' s.out)" -eq 2 ] || fail "memory lines: $(grep -c '^memory: ' s.out), expected 2"
[ "$(field s.jsonl data_copies)" = 1 ] && [ "$(field p.jsonl data_copies)" = 4 ] &&
    [ "$(field s.jsonl data_bytes)" = 2009600 ] ||
    fail "metrics: copies $(field s.jsonl data_copies) / $(field p.jsonl data_copies), bytes $(field s.jsonl data_bytes)"
mx=$(field s.jsonl peak_rss_max)
sm=$(field s.jsonl peak_rss_sum)
[ -n "$mx" ] && [ "$mx" -gt 0 ] && [ "$sm" -ge "$mx" ] || fail "peak RSS max '$mx', sum '$sm'"

# ---- IDX files of 14 MB (mnist from --data-dir): the proportional sets count one copy ----
be32() { printf "\\\\x%02x\\\\x%02x\\\\x%02x\\\\x%02x" $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }
idx() { # idx PREFIX N: PREFIX-images-idx3-ubyte and PREFIX-labels-idx1-ubyte of N samples
    { printf "\\x00\\x00\\x08\\x03$(be32 "$2")$(be32 28)$(be32 28)"; head -c $(($2 * 784)) /dev/urandom; } >"d/$1-images-idx3-ubyte"
    { printf "\\x00\\x00\\x08\\x01$(be32 "$2")"; head -c "$2" /dev/zero | tr '\0' '\3'; } >"d/$1-labels-idx1-ubyte"
}
mkdir d
idx train 16000
idx t10k 2000
I=(--model mlp --data mnist --data-dir "$T/d" --train-limit 256 --test-limit 128 --epochs 1
   --progress off)
mpi "${I[@]}" --metrics is.jsonl >is.out 2>&1 || fail "shared IDX run: $(cat is.out)"
HET_SHARED_DATA=0 mpi "${I[@]}" --metrics ip.jsonl >ip.out 2>&1 || fail "private IDX run: $(cat ip.out)"
b=$(field is.jsonl data_bytes)
ps=$(field is.jsonl pss_sum)
pp=$(field ip.jsonl pss_sum)
[ "$b" = $((18000 * 785)) ] || fail "IDX data_bytes '$b', expected $((18000 * 785))"
if [ -r /proc/self/smaps_rollup ]; then
    [ -n "$ps" ] && [ -n "$pp" ] && [ $((pp - ps)) -ge $((2 * b)) ] ||
        fail "proportional sets: private $pp, shared $ps bytes: expected at least 2 x $b more in private"
fi

# ---- a corrupt data file: every rank exits 1, one line, no hang ----
printf 'garbage' >d/t10k-labels-idx1-ubyte
HET_MPI_TIMEOUT=60 het_mpirun 4 "$HETRAIN" train "${I[@]}" >c.out 2>c.err
rc=$?
[ $rc -eq 1 ] || fail "corrupt file: mpirun exited $rc, expected 1"
[ "$(grep -c '^hetrain' c.err)" -eq 1 ] &&
    grep -q "^hetrain: $T/d/t10k-labels-idx1-ubyte: offset 0: bad magic 0x67617262, expected 0x00000801$" c.err ||
    fail "corrupt file: stderr $(cat c.err)"
# each rank's own status: Open MPI ends the job at the first non-zero exit, killing ranks still
# on their way out, unless told not to (then mpirun itself exits 0)
if [ "$het_mpi_flavor" = openmpi ]; then
    R='${OMPI_COMM_WORLD_RANK}'
    OMPI_MCA_orte_abort_on_non_zero_status=0 HET_MPI_TIMEOUT=60 het_mpirun 4 bash -c \
        "$HETRAIN train ${I[*]} >/dev/null 2>&1; echo \$? >rc.$R" >/dev/null 2>&1
    for r in 0 1 2 3; do
        [ "$(cat "rc.$r" 2>/dev/null)" = 1 ] ||
            fail "corrupt file: rank $r exit status '$(cat "rc.$r" 2>/dev/null)', expected 1"
    done
fi

[ $failures -eq 0 ] && echo "test_cli_shared: passed" || exit 1

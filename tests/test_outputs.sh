#!/usr/bin/env bash
# Outputs never destroy inputs, eval/export of any checkpoint on one process, and settings
# with two sources (FINDINGS-v3 classes A, C, D1):
# - an output that is the same file as an input or another output, by file identity (a
#   symbolic link, ./name, a dangling link to where the other would be created, a temporary
#   "<path>.tmp"), is refused before any work on every rank with one line naming both, exit 2,
#   and the input is unchanged: metrics through a link to the resumed checkpoint (A1, 2
#   ranks), calibrate --out onto a data file (A2), the config file as metrics, a speeds file
#   where the checkpoint's temporary goes, compare --out where a run's metrics would go;
# - a run that fails before its first epoch leaves an existing metrics file as it was;
# - allreduce, hgc (--slowdown 1,2,4, C1) and daso checkpoints of 2-4 ranks evaluate and
#   export on one process, with the test accuracy the training run printed;
# - --speeds with --speeds-file (D1), on the command line or in one config file, is refused
#   naming both; the command line's one replaces the config file's; a resumed hgc run refuses
#   speeds other than its checkpoint's.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
T=$(mktemp -d /tmp/het_outputs_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
S=(--data synthetic --train-limit 640 --test-limit 64 --progress off)
# refused NAME PATTERN [rc]: the last run (o.txt, e.txt) exited 2 with one hetrain line
refused() {
    local rc=$1 name=$2 want=$3
    [ "$rc" -eq 2 ] && [ "$(grep -c '^hetrain' e.txt)" -eq 1 ] && grep -q -- "$want" e.txt &&
        ! grep -q '^epoch' o.txt || fail "$name: rc $rc, $(cat e.txt)"
}

# ---- class A ----
het_mpirun 2 "$HETRAIN" train --model lenet5 "${S[@]}" --strategy hgc --speeds 1,1 --epochs 1 \
    --checkpoint c.ckpt --quiet >/dev/null 2>&1 || fail "A1 first run"
cp c.ckpt c.orig
ln -s c.ckpt m.jsonl
het_mpirun 2 "$HETRAIN" train --model lenet5 "${S[@]}" --strategy hgc --speeds 1,1 --epochs 3 \
    --resume --checkpoint c.ckpt --lr 1e6 --metrics m.jsonl >o.txt 2>e.txt
refused $? "A1 metrics linked to the checkpoint" "checkpoint: 'c.ckpt' is also the metrics file 'm.jsonl'"
cmp -s c.ckpt c.orig || fail "A1: the checkpoint changed"
if [ -d /usr/share/datasets/fashion-mnist ]; then
    mkdir d && cp /usr/share/datasets/fashion-mnist/* d/
    cp d/train-images-idx3-ubyte.gz img.orig
    "$HETRAIN" calibrate --model lenet5 --data-dir d --out d/train-images-idx3-ubyte.gz \
        --train-limit 640 --test-limit 64 --progress off >o.txt 2>e.txt
    refused $? "A2 calibrate onto a data file" "out: 'd/train-images-idx3-ubyte.gz' is also the data-dir file"
    cmp -s d/train-images-idx3-ubyte.gz img.orig || fail "A2: the image file changed"
fi
printf 'epochs = 1\nmodel = mlp\n' >r.cfg
cp r.cfg r.orig
"$HETRAIN" train --config r.cfg "${S[@]}" --metrics ./r.cfg >o.txt 2>e.txt
refused $? "config file as metrics" "metrics: './r.cfg' is also the config file 'r.cfg'"
cmp -s r.cfg r.orig || fail "the config file changed"
ln -s later.ckpt dangling
"$HETRAIN" train --model mlp "${S[@]}" --epochs 1 --checkpoint later.ckpt --trace dangling >o.txt 2>e.txt
refused $? "dangling link to the checkpoint" "checkpoint: 'later.ckpt' is also the trace file 'dangling'"
[ -e later.ckpt ] && fail "dangling link: a checkpoint was written"
printf '1\n' >n.ckpt.tmp
"$HETRAIN" train --model mlp "${S[@]}" --epochs 1 --strategy hgc --speeds-file n.ckpt.tmp \
    --checkpoint n.ckpt >o.txt 2>e.txt
refused $? "speeds file as the checkpoint's temporary" "checkpoint (its temporary file): 'n.ckpt.tmp' is also the speeds-file"
[ "$(cat n.ckpt.tmp)" = 1 ] || fail "the speeds file changed"
# compare --out: a run's metrics file would replace the speeds file, before anything is run
mkdir cmp && printf '1\n1\n' >cmp/hgc-seed1.jsonl
"$HETRAIN" compare --strategies hgc --out cmp --speeds-file cmp/hgc-seed1.jsonl --model mlp \
    --data synthetic --epochs 1 >o.txt 2>e.txt
refused $? "compare --out over the speeds file" "out: 'cmp/hgc-seed1.jsonl' is also the speeds-file"
[ "$(cat cmp/hgc-seed1.jsonl)" = "$(printf '1\n1')" ] && [ ! -e cmp/hgc-seed1.log ] ||
    fail "compare: the speeds file changed or a run started"
# a run that fails before its first epoch leaves the metrics file as it was
printf '{"old":1}\n' >keep.jsonl
"$HETRAIN" train --model lenet5 "${S[@]}" --epochs 1 --lr 1e30 --metrics keep.jsonl >o.txt 2>e.txt
rc=$?
[ $rc -eq 1 ] && [ "$(cat keep.jsonl)" = '{"old":1}' ] ||
    fail "failed run: rc $rc, metrics now '$(cat keep.jsonl)'"

# ---- class C: every strategy's checkpoint of 2-4 ranks on one process ----
for run in "allreduce 2" "hgc 3 --slowdown 1,2,4" "daso 4 --ranks-per-node 2"; do
    read -r strat P extra <<<"$run"
    # shellcheck disable=SC2086
    het_mpirun "$P" "$HETRAIN" train --model lenet5 "${S[@]}" --strategy "$strat" $extra \
        --epochs 1 --checkpoint "$strat.ckpt" >t.out 2>&1 || { fail "$strat on $P ranks: $(cat t.out)"; continue; }
    acc=$(sed -n 's/^done: .* test_acc \([0-9.]*\).*/\1/p' t.out)
    "$HETRAIN" eval --checkpoint "$strat.ckpt" >o.txt 2>e.txt
    rc=$?
    [ $rc -eq 0 ] && grep -q "test_acc $acc\$" o.txt ||
        fail "eval of a $strat checkpoint of $P ranks: rc $rc, $(cat o.txt e.txt) (trained: $acc)"
    "$HETRAIN" export --checkpoint "$strat.ckpt" --export-safetensors "$strat.st" >o.txt 2>e.txt &&
        [ -s "$strat.st" ] || fail "export of a $strat checkpoint of $P ranks: $(cat e.txt)"
done

# ---- class D1: hgc's speeds from two sources ----
printf '1\n1\n' >f.txt
"$HETRAIN" train --model mlp "${S[@]}" --epochs 1 --strategy hgc --speeds 3,1 --speeds-file f.txt >o.txt 2>e.txt
refused $? "--speeds with --speeds-file" "\-\-speeds '3,1' and --speeds-file 'f.txt' both give hgc's speeds"
printf 'speeds = 3,1\nspeeds-file = f.txt\n' >both.cfg
"$HETRAIN" train --model mlp "${S[@]}" --epochs 1 --strategy hgc --config both.cfg >o.txt 2>e.txt
refused $? "both in one config file" "both.cfg: speeds '3,1' and speeds-file 'f.txt' both give"
printf 'speeds-file = f.txt\n' >file.cfg
het_mpirun 2 "$HETRAIN" train --model mlp "${S[@]}" --epochs 1 --strategy hgc --config file.cfg \
    --speeds 3,1 >o.txt 2>&1 && grep -q '^hgc: given speeds 0.750/0.250' o.txt ||
    fail "the command line's --speeds over the config file's speeds-file: $(cat o.txt)"
het_mpirun 2 "$HETRAIN" train --model mlp "${S[@]}" --epochs 1 --strategy hgc --speeds 3,1 \
    --checkpoint s.ckpt --quiet >/dev/null 2>&1 || fail "hgc 3,1 run"
het_mpirun 2 "$HETRAIN" train --resume --checkpoint s.ckpt --epochs 2 --speeds 1,1 \
    --progress off >o.txt 2>e.txt
rc=$?
[ $rc -eq 2 ] && [ "$(grep -c '^hetrain' e.txt)" -eq 1 ] &&
    grep -q "\-\-speeds '1,1': the checkpoint s.ckpt continues hgc with the speeds it saved" e.txt ||
    fail "resume with other speeds: rc $rc, $(cat e.txt)"

[ $failures -eq 0 ] && echo "test_outputs: passed" || exit 1

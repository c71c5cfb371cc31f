#!/usr/bin/env bash
# hetrain compare:
# - a real comparison (mpirun, 2 ranks, synthetic data, mlp, allreduce and hgc) writes
#   compare.md, compare.csv (the same number of fields on every line), accuracy.svg and
#   split.svg (well-formed XML, exactly one polyline per strategy in accuracy.svg), keeps every
#   run's JSONL and log, and prints the table; the parameter servers asp and inhad (3 ranks)
#   and the pipelines gpipe and qfb (2 ranks, --micro-batches for them only) get their rows
#   beside allreduce;
# - the figures, from metrics files with known numbers (a fake launcher, $HET_MPIEXEC, copies
#   them in place of a run): means and spreads over 2 seeds, "-" / empty where there is none;
#   --baseline's table paired by seed (ratios, differences, Student's t interval); the tuning
#   grid (--tune-lr, --tune-momentum): every point run with --holdout, each strategy compared at
#   its best (the first of equals; a failed point loses), the grid's table; --set S:KEY=VALUE
#   reaches S's runs only, last;
#   a strategy's own options (--max-staleness) reach only the runs of the strategies that
#   have them, and one that none of the strategies compared has is refused; the rank count
#   goes where the launcher takes it (-n N after an srun, {n} replaced, else -np N; {n} twice
#   refused); daso named without --ranks-per-node runs (the real nodes), and by default is
#   skipped, outside a Slurm allocation of 2+ nodes, with a note;
# - a malformed metrics file and a failing run: exit 1, one line on stderr naming the file and
#   line or the strategy and command, and no table left behind;
# - --out that is a file, or cannot be made or written in: exit 1, one line naming --out,
#   before anything is announced or run;
# - SIGTERM / SIGINT to compare while a run trains (under mpirun; under fake launchers that
#   die and leave a child in a process group of its own, or ignore the signal): exit 143 / 130,
#   one line naming the run stopped, no table, and no process of the run left (pgrep on a
#   marker in their command lines); a failing run leaves none either;
# - usage errors exit 2 with one line and nothing on stdout, compare under mpirun too.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
T=$(mktemp -d /tmp/het_compare_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
COMMON=(--data synthetic --model mlp --train-limit 256 --test-limit 128 --epochs 3 --batch 32)

# xmllint (libxml2-utils, which scripts/setup.sh installs) is required: a missing checker fails
# the test rather than passing it unchecked
command -v xmllint >/dev/null 2>&1 || { echo "FAIL: xmllint not found (libxml2-utils)" >&2; exit 1; }
xml_ok() { xmllint --noout "$1"; } # well-formed XML?
csv_fields() { # the distinct field counts of a CSV file (no quoted commas in ours)
    awk -F, '{ print NF }' "$1" | sort -u | tr '\n' ' '
}
csv_get() { # csv_get FILE STRATEGY COLUMN
    awk -F, -v s="$2" -v c="$3" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $1 == s { print $(col[c]) }' "$1"
}

# ---- a real comparison ----
timeout 300 "$HETRAIN" compare "${COMMON[@]}" --strategies allreduce,hgc --ranks 2 \
    --target-acc 0.5 --out out >run.out 2>run.err
rc=$?
[ $rc -eq 0 ] || fail "compare exited $rc: $(cat run.err) $(cat out/*.log 2>/dev/null)"
for f in compare.md compare.csv accuracy.svg split.svg allreduce-seed1.jsonl hgc-seed1.jsonl \
         allreduce-seed1.log hgc-seed1.log; do
    [ -s "out/$f" ] || fail "out/$f is missing or empty"
done
[ "$(csv_fields out/compare.csv)" = "22 " ] ||
    fail "compare.csv: field counts $(csv_fields out/compare.csv), expected 22 on every line: $(cat out/compare.csv)"
[ "$(wc -l <out/compare.csv)" -eq 3 ] || fail "compare.csv: expected a header and 2 rows"
for s in allreduce hgc; do
    acc=$(csv_get out/compare.csv $s final_test_acc)
    awk -v a="$acc" 'BEGIN { exit !(a > 0 && a <= 1) }' || fail "$s: final_test_acc '$acc'"
    bytes=$(csv_get out/compare.csv $s bytes_node_per_rank_epoch)
    awk -v b="$bytes" 'BEGIN { exit !(b > 0) }' || fail "$s: bytes_node '$bytes' (2 ranks on a node send)"
    grep -q "^| $s | 2 | " out/compare.md || fail "compare.md has no row for $s"
    grep -q "^| $s | 2 | " run.out || fail "stdout has no row for $s: $(cat run.out)"
    grep -q "<text[^>]*>$s</text>" out/accuracy.svg || fail "accuracy.svg: no legend for $s"
    grep -q ">$s</text>" out/split.svg || fail "split.svg: no label for $s"
done
for f in accuracy.svg split.svg; do xml_ok "out/$f" || fail "$f is not well-formed XML"; done
n=$(grep -o '<polyline' out/accuracy.svg | wc -l)
[ "$n" -eq 2 ] || fail "accuracy.svg: $n polylines, expected one per strategy (2)"
[ "$(grep -c '<path' out/accuracy.svg)" -eq 0 ] || fail "accuracy.svg: unexpected <path>"
grep -q 'viewBox=' out/accuracy.svg || fail "accuracy.svg: no viewBox"
[ "$(grep -o '<rect[^>]*fill="#' out/split.svg | wc -l)" -ge 8 ] ||
    fail "split.svg: expected 4 stacked segments per strategy"
grep -q "plots accuracy.svg" run.out || fail "stdout does not say where the plots are"

# ---- the parameter servers beside allreduce (3 ranks: a server and 2 workers) ----
timeout 300 "$HETRAIN" compare "${COMMON[@]}" --strategies allreduce,asp,inhad --ranks 3 \
    --target-acc 0.5 --out ps >ps.out 2>ps.err || fail "compare with asp, inhad: $(cat ps.err)"
for s in allreduce asp inhad; do
    grep -q "^| $s | 3 | " ps/compare.md || fail "compare.md has no row for $s: $(cat ps/compare.md)"
done

# ---- the pipelines (2 ranks: 2 stages), a pipeline option passed to them only ----
timeout 300 "$HETRAIN" compare "${COMMON[@]}" --strategies allreduce,gpipe,qfb --ranks 2 \
    --micro-batches 2 --target-acc 0.5 --out pipe >pipe.out 2>pipe.err ||
    fail "compare with gpipe, qfb: $(cat pipe.err)"
for s in allreduce gpipe qfb; do
    grep -q "^| $s | 2 | " pipe/compare.md || fail "compare.md has no row for $s: $(cat pipe/compare.md)"
done

# ---- the figures, from known metrics (a fake launcher copies them) ----
mkdir fake
cat >fake/launch.sh <<'EOF'
#!/usr/bin/env bash
# fake MPI launcher: copies $FAKE/STRATEGY-SEED.jsonl to the --metrics path, exits $FAKE_RC
while [ $# -gt 0 ]; do
    case $1 in --strategy) s=$2 ;; --seed) k=$2 ;; --metrics) m=$2 ;; esac
    shift
done
[ -f "$FAKE/$s-$k.jsonl" ] && cp "$FAKE/$s-$k.jsonl" "$m"
exit "${FAKE_RC:-0}"
EOF
ep() { # epoch test_acc samples_per_s elapsed_s [wait of rank 1 [link_over_max]]
    printf '{"type":"epoch","epoch":%s,"loss":1.5,"test_acc":%s,"samples":64,"samples_per_s":%s,' "$1" "$2" "$3"
    printf '"elapsed_s":%s,"compute_s":[1,1],"comm_s":[0.5,0.5],"wait_s":[0,%s],"delay_s":[0,0],' "$4" "${5:-1}"
    printf '"link_busy_max":0.5,"link_over_max":%s,' "${6:-0.1}"
    printf '"bytes_node":[100,300],"bytes_cross":[0,20],"hgc":{"batch":[3,1],"x":[true,null,"a\\"b"]}}\n'
}
{ ep 1 0.5 100 2; echo '{"type":"step","epoch":2,"step":1,"loss":1,"acc":null}'; ep 2 0.9 300 4 1 0.3; } >fake/allreduce-1.jsonl
{ ep 1 0.7 200 3; ep 2 0.85 200 6; } >fake/allreduce-2.jsonl
noarr='{"type":"epoch","epoch":%s,"test_acc":%s,"samples_per_s":50,"elapsed_s":%s}\n'
printf "$noarr$noarr" 1 0.1 1 2 null 2 >fake/hgc-1.jsonl
printf "$noarr$noarr" 1 0.2 1 2 0.3 2 >fake/hgc-2.jsonl
fake() { FAKE=$T/fake HET_MPIEXEC="bash $T/fake/launch.sh" "$HETRAIN" compare "$@"; }
fake --data synthetic --epochs 2 --ranks 2 --seeds 2 --target-acc 0.8 --out known \
    --strategies allreduce,hgc >known.out 2>known.err || fail "known metrics: $(cat known.err)"
want=("allreduce epoch_s 2.5" "allreduce epoch_s_spread 1" "allreduce time_to_target_s 5"
      "allreduce time_to_target_s_spread 2" "allreduce target_reached_seeds 2"
      "allreduce final_test_acc 0.875" "allreduce samples_per_s 200"
      "allreduce bytes_node_per_rank_epoch 200" "allreduce bytes_cross_per_rank_epoch 10"
      "allreduce wait_share 0.25" "allreduce wait_share_spread 0" "hgc time_to_target_s "
      "hgc target_reached_seeds 0" "hgc final_test_acc 0.3" "hgc final_test_acc_spread 0"
      "hgc wait_share " "hgc epoch_s 1"
      "allreduce link_over_share 0.2" "allreduce link_over_share_spread 0.2" "hgc link_over_share ")
for w in "${want[@]}"; do
    read -r s col val <<<"$w"
    got=$(csv_get known/compare.csv "$s" "$col")
    [ "$got" = "${val:-}" ] || fail "known metrics: $s $col = '$got', expected '${val:-}'"
done
grep -q '^| allreduce | 2 | 2.50 ± 1.00 | 5.00 ± 2.00 | 0.8750 ± 0.0500 | 200 ± 0 | 200 B ± 0 B | 10 B ± 0 B | 25.0 % ± 0.0 % | 20.0 % ± 20.0 % |$' known/compare.md ||
    fail "known metrics: allreduce row of compare.md: $(grep allreduce known/compare.md)"
grep -q '^| hgc | 2 | 1.00 ± 0.00 | - | 0.3000 (1/2 seeds) | 50 ± 0 | - | - | - | - |$' known/compare.md ||
    fail "known metrics: hgc row of compare.md: $(grep '^| hgc' known/compare.md)"
xml_ok known/accuracy.svg || fail "known: accuracy.svg is not well-formed"
# --baseline: per seed hgc's figure against allreduce's (epochs 1/2 and 1/3: 0.417, t with one
# degree of freedom 12.706 x 0.0833; no time to target; the accuracy of the one seed both have)
fake --data synthetic --epochs 2 --ranks 2 --seeds 2 --target-acc 0.8 --out paired \
    --strategies allreduce,hgc --baseline allreduce >paired.out 2>paired.err || fail "--baseline: $(cat paired.err)"
grep -q "^Paired with allreduce by seed" paired/compare.md && grep -q "^Paired with allreduce" paired.out ||
    fail "--baseline: no paired table: $(cat paired/compare.md)"
grep -q '^| hgc | 0.417 \[-0.642, 1.476\] | - | -55.00 (1 seed) |$' paired/compare.md ||
    fail "--baseline: hgc's paired row: $(grep '^| hgc' paired/compare.md | tail -1)"
grep -q '^| allreduce | [0-9]' <(sed -n '/^Paired/,$p' paired/compare.md) &&
    fail "--baseline: the baseline has a row against itself"
# the virtual clock: the times are vtime_s (training only), the table says which clock
vt='{"type":"epoch","epoch":%s,"test_acc":%s,"samples_per_s":50,"elapsed_s":%s,"clock":"virtual","epoch_s":%s,"vtime_s":%s}\n'
printf "$vt$vt" 1 0.5 10 0.25 0.25 2 0.9 20 0.5 0.5 >fake/allreduce-1.jsonl
fake --data synthetic --epochs 2 --ranks 2 --target-acc 0.8 --out virt --strategies allreduce \
    --clock virtual >virt.out 2>virt.err || fail "virtual metrics: $(cat virt.err)"
for w in "epoch_s 0.25" "time_to_target_s 0.5"; do
    read -r col val <<<"$w"
    got=$(csv_get virt/compare.csv allreduce "$col")
    [ "$got" = "$val" ] || fail "virtual metrics: $col = '$got', expected '$val' (vtime_s)"
done
grep -q '^| strategy | ranks | time/epoch (virtual s) | time to 0.8 acc (virtual s) |' virt/compare.md &&
    grep -q 'Clock: virtual' virt/compare.md || fail "virtual: the table does not name its clock: $(head -5 virt/compare.md)"
grep -q "virtual time (training) since the start" virt/accuracy.svg || fail "virtual: the accuracy plot's x axis does not name the virtual clock"
grep -q "wall time since the start" out/accuracy.svg || fail "wall: the accuracy plot's x axis does not name the wall clock"

# a strategy's own options go to the runs of the strategies that have them, and only there
cat >fake/argv.sh <<'EOF'
#!/usr/bin/env bash
# fake MPI launcher: records the words each strategy's run got, then runs as launch.sh
for a in "$@"; do [ "$a" = --strategy ] && s=next || { [ "${s:-}" = next ] && s=$a; }; done
printf '%s\n' "$*" >"$FAKE/argv-$s"
exec bash "$FAKE/launch.sh" "$@"
EOF
for s in hgc asp inhad; do printf "$noarr$noarr" 1 0.2 1 2 0.3 2 >"fake/$s-1.jsonl"; done
FAKE=$T/fake HET_MPIEXEC="bash $T/fake/argv.sh" "$HETRAIN" compare --data synthetic --epochs 2 \
    --ranks 3 --out sopt --strategies hgc,asp,inhad --max-staleness 2 --inhad-threshold=3 \
    --lr 0.1 >sopt.out 2>sopt.err || fail "strategy options: $(cat sopt.err)"
grep -q -- '--lr 0.1 ' fake/argv-hgc && ! grep -q -- 'staleness\|threshold' fake/argv-hgc ||
    fail "strategy options: hgc's run got '$(cat fake/argv-hgc)'"
grep -q -- '--max-staleness 2 --lr 0.1 ' fake/argv-asp && ! grep -q -- threshold fake/argv-asp ||
    fail "strategy options: asp's run got '$(cat fake/argv-asp)'"
grep -q -- '--max-staleness 2 --inhad-threshold=3 --lr 0.1 ' fake/argv-inhad ||
    fail "strategy options: inhad's run got '$(cat fake/argv-inhad)'"

# the tuning grid: every strategy runs every point with --holdout on the first seed, and the
# comparison runs with each one's best point (a fake launcher: the held-out accuracy of a point
# is its file's; allreduce is best at lr 0.1 / momentum 0.9, hgc at lr 0.05 / momentum 0.5,
# and hgc's lr 0.1 / momentum 0.5 run fails)
cat >fake/tune.sh <<'EOF2'
#!/usr/bin/env bash
# fake MPI launcher: a tuning run (--holdout) copies $FAKE/tune-S-LR-M.jsonl, a comparison run
# records its words and runs as launch.sh
h="" lr="" m=""
for a in "$@"; do
    case ${p:-} in --strategy) s=$a ;; --lr) lr=$a ;; --momentum) m=$a ;; --holdout) h=$a ;;
                   --metrics) out=$a ;; esac
    p=$a
done
if [ -n "$h" ]; then
    printf '%s\n' "$*" >>"$FAKE/argv-tune"
    [ -f "$FAKE/tune-$s-$lr-$m.jsonl" ] || exit 3
    cp "$FAKE/tune-$s-$lr-$m.jsonl" "$out"; exit 0
fi
printf '%s\n' "$*" >"$FAKE/argv-main-$s"
exec bash "$FAKE/launch.sh" "$@"
EOF2
one='{"type":"epoch","epoch":1,"test_acc":%s,"samples_per_s":50,"elapsed_s":1}\n'
for x in "allreduce 0.05 0.5 0.3" "allreduce 0.05 0.9 0.5" "allreduce 0.1 0.5 0.6" \
         "allreduce 0.1 0.9 0.7" "hgc 0.05 0.5 0.8" "hgc 0.05 0.9 null" "hgc 0.1 0.9 0.8"; do
    read -r s lr m a <<<"$x"
    printf "$one" "$a" >"fake/tune-$s-$lr-$m.jsonl"
done
rm -f fake/argv-tune
FAKE=$T/fake HET_MPIEXEC="bash $T/fake/tune.sh" "$HETRAIN" compare --data synthetic --epochs 2 \
    --ranks 2 --out tuned --strategies allreduce,hgc --lr 0.3 --tune-lr 0.05,0.1 \
    --tune-momentum 0.5,0.9 --tune-epochs 1 --tune-holdout 100 >tuned.out 2>tuned.err ||
    fail "tuning: $(cat tuned.err)"
[ "$(grep -- '--epochs 1 ' fake/argv-tune | grep -c -- '--holdout 100 ')" -eq 8 ] ||
    fail "tuning: expected 8 runs of 1 epoch with 100 held out: $(cat fake/argv-tune)"
grep -q -- '--lr 0.3 --lr 0.1 --momentum 0.9 --strategy allreduce' fake/argv-main-allreduce ||
    fail "tuning: allreduce's comparison run got '$(cat fake/argv-main-allreduce)'"
grep -q -- '--lr 0.3 --lr 0.05 --momentum 0.5 --strategy hgc' fake/argv-main-hgc ||
    fail "tuning: hgc's comparison run (the first of equals) got '$(cat fake/argv-main-hgc)'"
grep -q '^| allreduce | 0.3000 | 0.5000 | 0.6000 | \*\*0.7000\*\* |$' tuned/compare.md &&
    grep -q '^| hgc | \*\*0.8000\*\* | - | - | 0.8000 |$' tuned/compare.md ||
    fail "tuning: the grid's table: $(sed -n '/^Tuning/,$p' tuned/compare.md)"
grep -q "hgc, lr 0.1, momentum 0.5 ... failed" tuned.out || fail "tuning: the failed point: $(cat tuned.out)"
# --set S:KEY=VALUE: only S's runs get it, after the others (so it wins)
FAKE=$T/fake HET_MPIEXEC="bash $T/fake/argv.sh" "$HETRAIN" compare --data synthetic --epochs 2 \
    --ranks 3 --out setopt --strategies hgc,asp --threads 1 --set hgc:threads=2 \
    --set hgc:lr=0.2 >setopt.out 2>setopt.err || fail "--set: $(cat setopt.err)"
grep -q -- '--threads 1 --threads 2 --lr 0.2 --strategy hgc ' fake/argv-hgc ||
    fail "--set: hgc's run got '$(cat fake/argv-hgc)'"
grep -q -- '--threads 2\|--lr 0.2' fake/argv-asp && fail "--set: asp's run got '$(cat fake/argv-asp)'"

# ---- the rank count where the launcher takes it: "-n N" after an srun, "{n}" replaced, else
# "-np N"; daso named without --ranks-per-node runs (the real nodes), by default it is skipped
mkdir -p fake/bin
cat >fake/bin/srun <<'EOF'
#!/usr/bin/env bash
# fake srun: records its words, then runs as launch.sh
printf '%s\n' "$*" >"$FAKE/argv-srun"
exec bash "$FAKE/launch.sh" "$@"
EOF
chmod +x fake/bin/srun
cp fake/allreduce-1.jsonl fake/daso-1.jsonl
fake --data synthetic --epochs 2 --ranks 2 --out np --strategies allreduce \
    --launcher "$T/fake/bin/srun --mpi=pmix" >np.out 2>np.err || fail "srun launcher: $(cat np.err)"
grep -q -- "^--mpi=pmix -n 2 $HETRAIN train " fake/argv-srun ||
    fail "srun launcher: the run got '$(cat fake/argv-srun)', expected '--mpi=pmix -n 2 ...'"
FAKE=$T/fake "$HETRAIN" compare --data synthetic --epochs 2 --ranks 3 --out np \
    --strategies allreduce --launcher "bash $T/fake/argv.sh --ntasks={n} --x" >np.out 2>np.err ||
    fail "{n} launcher: $(cat np.err)"
grep -q -- "^--ntasks=3 --x $HETRAIN train " fake/argv-allreduce ||
    fail "{n} launcher: the run got '$(cat fake/argv-allreduce)', expected '--ntasks=3 --x ...'"
FAKE=$T/fake "$HETRAIN" compare --data synthetic --epochs 2 --ranks 2 --out np \
    --strategies allreduce --launcher "bash $T/fake/argv.sh" >np.out 2>np.err ||
    fail "default count: $(cat np.err)"
grep -q -- "^-np 2 $HETRAIN train " fake/argv-allreduce ||
    fail "default count: the run got '$(cat fake/argv-allreduce)', expected '-np 2 ...'"
"$HETRAIN" compare --data synthetic --epochs 2 --out np --launcher "srun -n{n} {n}" \
    >np.out 2>np.err
rc=$?
[ $rc -eq 2 ] && grep -q "^hetrain compare: --launcher: '{n}' (the rank count) given twice$" \
    np.err || fail "{n} twice: exit $rc, $(cat np.err)"
FAKE=$T/fake HET_MPIEXEC="bash $T/fake/argv.sh" "$HETRAIN" compare --data synthetic --epochs 2 \
    --ranks 2 --out np --strategies daso >np.out 2>np.err ||
    fail "daso named, no --ranks-per-node: $(cat np.err)"
grep -q -- "--strategy daso" fake/argv-daso || fail "daso named: no daso run: $(cat np.out)"
env -u SLURM_JOB_NUM_NODES FAKE="$T/fake" HET_MPIEXEC="bash $T/fake/launch.sh" "$HETRAIN" \
    compare --data synthetic --epochs 2 --ranks 2 --out np >np.out 2>np.err # others fail here
grep -q "^compare: skipping daso: it needs 2 or more nodes" np.out ||
    fail "default strategies, one machine: daso not skipped: $(cat np.out)"

# ---- malformed metrics: exit 1, one line naming the file and line, no table ----
bad() { # bad "EXPECTED IN STDERR" [CONTENT-OF-allreduce-1.jsonl: none without]
    rm -f fake/allreduce-1.jsonl
    [ $# -lt 2 ] || printf '%s' "$2" >fake/allreduce-1.jsonl
    fake --data synthetic --epochs 2 --ranks 2 --out known --strategies allreduce \
        >bad.out 2>bad.err
    local rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <bad.err)" -eq 1 ] && grep -q -- "$1" bad.err ||
        fail "malformed ($1): exit $rc, stderr: $(cat bad.err)"
    [ ! -e known/compare.md ] && [ ! -e known/compare.csv ] && [ ! -e known/accuracy.svg ] ||
        fail "malformed ($1): a table was left in known/"
}
bad "known/allreduce-seed1.jsonl:2: column 27: expected a string" "$(ep 1 0.5 1 1)
{\"type\":\"epoch\",\"epoch\":2,}
"
bad "allreduce-seed1.jsonl:1: column .*: an array of 1 value ends here, expected 2" \
    '{"type":"epoch","epoch":1,"test_acc":1,"samples_per_s":1,"elapsed_s":1,"compute_s":[1]}
'
bad "allreduce-seed1.jsonl:1: column .*: expected a number or null" \
    '{"type":"epoch","epoch":1,"test_acc":NaN,"samples_per_s":1,"elapsed_s":1}
'
bad "allreduce-seed1.jsonl:2: .*epoch 3, expected epoch 2 of 2" "$(ep 1 0.5 1 1; ep 3 0.5 1 1)"
bad "allreduce-seed1.jsonl: 1 epoch records, expected 2" "$(ep 1 0.5 1 1)"
bad "allreduce-seed1.jsonl:1: column 1: expected '{'" "$(echo; ep 1 0.5 1 1)"
bad "allreduce-seed1.jsonl:1: .*unexpected text after the object" "$(ep 1 0.5 1 1)x"
bad "allreduce-seed1.jsonl:1: .*no \"elapsed_s\"" '{"type":"epoch","epoch":1,"test_acc":1,"samples_per_s":1}'
bad "allreduce-seed1.jsonl: 0 epoch records, expected 2" ""
bad "allreduce-seed1.jsonl: cannot read: No such file"

# ---- a failing run: one line naming the strategy and the command; the others still run, the
# tables mark it, the exit status is 1 ----
timeout 300 "$HETRAIN" compare "${COMMON[@]}" --strategies hgc,allreduce --speeds 1,2,3 \
    --out out >f.out 2>f.err
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <f.err)" -eq 1 ] && grep -q "strategy hgc (seed 1) failed, exit status 1: .* -np 2 .* train .*--strategy hgc" f.err &&
    grep -q "3 speeds for 2 ranks" f.err || fail "failing run: exit $rc, stderr: $(cat f.err)"
grep -q "run 2/2: allreduce, seed 1 \.\.\. [0-9.]* s, test_acc" f.out ||
    fail "failing run: the run after the failed one did not run: $(cat f.out)"
grep -q '^| hgc (failed) | 2 | - | - |' out/compare.md && grep -q '^| allreduce | 2 | [0-9]' out/compare.md &&
    grep -q 'strategy hgc.*: \*\*failed\*\*, hetrain compare: strategy hgc (seed 1) failed, exit status 1' out/compare.md ||
    fail "failing run: compare.md does not mark the failed run: $(cat out/compare.md)"
[ "$(csv_get out/compare.csv hgc failed_seeds)" = 1 ] && [ "$(csv_get out/compare.csv allreduce failed_seeds)" = 0 ] &&
    [ -n "$(csv_get out/compare.csv allreduce final_test_acc)" ] && [ -z "$(csv_get out/compare.csv hgc final_test_acc)" ] ||
    fail "failing run: compare.csv: $(cat out/compare.csv)"
n=$(grep -o '<polyline' out/accuracy.svg | wc -l)
[ "$n" -eq 2 ] && xml_ok out/accuracy.svg || fail "failing run: accuracy.svg has $n polylines or is not well-formed"
FAKE_RC=3 fake --data synthetic --epochs 2 --strategies allreduce --out known >f.out 2>f.err
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <f.err)" -eq 1 ] && grep -q "strategy allreduce (seed 1) failed, exit status 3: bash .*launch.sh -np 2 " f.err ||
    fail "launcher exit 3: exit $rc, stderr: $(cat f.err)"
# the run's error is named even when the launcher wrote the start's banner after it (a rank's
# stdout and stderr reach the log through two pipes)
cat >fake/late.sh <<'EOF'
#!/usr/bin/env bash
echo "hetrain: hgc: 3 speeds for 2 ranks, expected one per rank" >&2
echo "hetrain: mlp on synthetic: 256 train / 128 test samples of 1x28x28, 10 classes"
echo "mpirun detected that one or more processes exited with non-zero status"
exit 1
EOF
HET_MPIEXEC="bash $T/fake/late.sh" "$HETRAIN" compare --data synthetic --epochs 2 --out late \
    --strategies hgc >f.out 2>f.err
rc=$?
[ $rc -eq 1 ] && grep -q 'output in late/hgc-seed1.log: "hetrain: hgc: 3 speeds for 2 ranks' f.err ||
    fail "banner after the error: exit $rc, stderr: $(cat f.err)"

# ---- --out: checked before any run, named in one line; nothing announced, nothing run ----
outbad() { # outbad "EXPECTED IN STDERR" OUT [run as: setpriv args]
    local want=$1 out=$2
    shift 2
    "$@" "$HETRAIN" compare --data synthetic --epochs 1 --out "$out" >o.out 2>o.err
    local rc=$?
    [ $rc -eq 1 ] && [ ! -s o.out ] && [ "$(wc -l <o.err)" -eq 1 ] && grep -q -- "$want" o.err ||
        fail "--out $out: exit $rc (expected 1), stdout: $(cat o.out), stderr: $(cat o.err)"
}
echo data >afile
outbad "^hetrain compare: --out afile: exists and is not a folder$" afile
outbad "^hetrain compare: --out afile/sub: cannot create afile/sub: Not a directory$" afile/sub
[ "$(cat afile)" = data ] || fail "--out afile: the file was changed"
RO=$(mktemp -d /tmp/het_compare_ro_XXXXXX)
chmod 755 "$RO"
if [ "$(id -u)" -eq 0 ]; then # root writes anywhere: the check runs as nobody
    as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    "${as[@]}" true 2>/dev/null || as=()
else
    as=(env)
    chmod 555 "$RO"
fi
if [ ${#as[@]} -gt 0 ]; then
    outbad "^hetrain compare: --out $RO: cannot write in it: Permission denied$" "$RO" "${as[@]}"
    outbad "^hetrain compare: --out $RO/x/y: cannot create $RO/x: Permission denied$" "$RO/x/y" "${as[@]}"
    [ -e "$RO/x" ] && fail "--out $RO/x/y: created $RO/x"
else
    echo "test_compare: --out not writable: skipped (root without setpriv)"
fi
chmod 755 "$RO"
rm -rf "$RO"

# ---- signals: SIGTERM / SIGINT reach the run, compare waits for it, says what it stopped
# (one line), exits 128 + the signal, writes no table, and nothing of the run is left (every
# process of it carries $MARK in its command line) ----
MARK=hetcmp-$$-$RANDOM
left() { pgrep -f -- "$MARK" | tr '\n' ' '; }
show_left() { local p; for p in $(left); do ps -o pid=,pgid=,sid=,args= -p "$p"; done; }
cleanup_marked() { local p; for p in $(pgrep -f -- "$MARK"); do kill -9 "$p" 2>/dev/null; done; }
trap 'cleanup_marked; rm -rf "$T"' EXIT
# sig_run SIG NAME READY-FILE COMPARE-ARGS...: compare in the background, SIG once READY-FILE
# exists (the run has really started); sets rc (124: compare did not end within 60 s)
sig_run() {
    local sig=$1 name=$2 ready=$3
    shift 3
    "$HETRAIN" compare "$@" --out "$T/$name-$MARK" >"$name.out" 2>"$name.err" &
    local cp=$! i
    for i in $(seq 600); do [ -e "$ready" ] && break; sleep 0.1; done
    [ -e "$ready" ] || fail "$name: the run did not start within 60 s: $(cat "$name.err")"
    kill -s "$sig" "$cp"
    for i in $(seq 600); do kill -0 "$cp" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$cp" 2>/dev/null; then
        kill -9 "$cp"
        rc=124
    else
        wait "$cp"
        rc=$?
    fi
}
# sig_check NAME WANT-RC STDERR-REGEX: what sig_run left
sig_check() {
    local name=$1 want=$2 re=$3
    [ "$rc" -eq "$want" ] || fail "$name: exit $rc, expected $want: $(cat "$name.err")"
    [ "$(wc -l <"$name.err")" -eq 1 ] && grep -Eq -- "$re" "$name.err" ||
        fail "$name: stderr: $(cat "$name.err")"
    [ -z "$(left)" ] || fail "$name: processes of the run left: $(show_left)"
    ls "$T/$name-$MARK"/compare.* "$T/$name-$MARK"/*.svg >/dev/null 2>&1 &&
        fail "$name: a table was written"
    cleanup_marked
}
# the real launcher: mpirun and 2 ranks; SIGTERM once the metrics file exists
sig_run TERM term "$T/term-$MARK/allreduce-seed1.jsonl" "${COMMON[@]}" --epochs 100000 \
    --strategies allreduce,hgc --ranks 2
sig_check term 143 "^hetrain compare: interrupted by SIGTERM: stopped run 1/2 \(strategy allreduce, seed 1; metrics $T/term-$MARK/allreduce-seed1.jsonl, output $T/term-$MARK/allreduce-seed1.log\); no table written$"
grep -q "^compare: run 1/2: allreduce, seed 1 ... interrupted$" term.out || fail "term: stdout: $(cat term.out)"
# a launcher that dies of SIGINT and leaves a child in a process group of its own (as
# mpirun's ranks are), and one that ignores the signal (killed after 10 s)
cat >fake/orphan.sh <<'SH'
#!/usr/bin/env bash
set -m # the child in a process group of its own
bash -c 'sleep 600; true' "$MARK-child" &
touch "$READY"
wait
SH
cat >fake/deaf.sh <<'SH'
#!/usr/bin/env bash
trap '' INT TERM
bash -c 'sleep 600; true' "$MARK-child" &
touch "$READY"
while :; do wait; done
SH
cat >fake/fails.sh <<'SH'
#!/usr/bin/env bash
set -m
bash -c 'sleep 600; true' "$MARK-child" &
exit 3
SH
export MARK
READY=$T/ready-orphan HET_MPIEXEC="bash $T/fake/orphan.sh" sig_run INT orphan "$T/ready-orphan" \
    --data synthetic --epochs 1 --strategies hgc --seed 4
sig_check orphan 130 "^hetrain compare: interrupted by SIGINT: stopped run 1/1 \(strategy hgc, seed 4; metrics .*/hgc-seed4.jsonl, output .*/hgc-seed4.log\); no table written$"
READY=$T/ready-deaf HET_MPIEXEC="bash $T/fake/deaf.sh" sig_run TERM deaf "$T/ready-deaf" \
    --data synthetic --epochs 1 --strategies allreduce
sig_check deaf 143 "^hetrain compare: interrupted by SIGTERM: stopped run 1/1 \(strategy allreduce, seed 1; .*; killed after 10 s\); no table written$"
# a run that fails leaves nothing behind either
HET_MPIEXEC="bash $T/fake/fails.sh" "$HETRAIN" compare --data synthetic --epochs 1 \
    --strategies allreduce --out "$T/fails-$MARK" >fails.out 2>fails.err
rc=$?
[ $rc -eq 1 ] && grep -q "failed, exit status 3" fails.err || fail "fails: exit $rc: $(cat fails.err)"
[ -z "$(left)" ] || fail "fails: processes of the run left: $(show_left)"
cleanup_marked

# ---- usage errors: exit 2, one line, nothing on stdout ----
usage() { # usage "EXPECTED IN STDERR" ARGS...
    local want=$1
    shift
    "$HETRAIN" compare "$@" >u.out 2>u.err
    local rc=$?
    [ $rc -eq 2 ] && [ ! -s u.out ] && [ "$(wc -l <u.err)" -eq 1 ] && grep -q -- "$want" u.err ||
        fail "usage ($*): exit $rc (expected 2), stdout $(wc -c <u.out) bytes, stderr: $(cat u.err)"
}
usage "unknown strategy 'sgd', expected some of: allreduce, hgc" --strategies allreduce,sgd
usage "hgc is named twice" --strategies hgc,hgc
usage "\-\-baseline: gpipe is not among the strategies compared" --strategies allreduce,hgc --baseline gpipe
usage "\-\-tune-lr: each value > 0, not '0'" --strategies allreduce --tune-lr 0.1,0
usage "\-\-tune-momentum: each value in \[0, 1), not '1'" --strategies allreduce --tune-momentum 1
usage "\-\-tune-epochs and \-\-tune-holdout need a grid" --strategies allreduce --tune-epochs 2
usage "\-\-set: 'gpipe' is not among the strategies compared" --strategies allreduce --set gpipe:threads=2
usage "\-\-set allreduce:nokey=1: nokey: unknown key" --strategies allreduce --set allreduce:nokey=1
usage "\-\-set: 'allreduce', expected STRATEGY:KEY=VALUE" --strategies allreduce --set allreduce
usage "\-\-ranks: 0 is out of range" --ranks 0
usage "\-\-seeds: 'two' is not an integer" --seeds two
usage "\-\-target-acc: '1.5' is not a number in (0, 1]" --target-acc 1.5
usage "\-\-out: missing value" --out
usage "option \-\-metrics does not apply to this command" --metrics m.jsonl
usage "option \-\-strategy does not apply to this command" --strategy hgc
usage "unknown option \-\-fast" --fast
usage "\-\-slowdown: 3 factors for \-\-ranks 2" --slowdown 1,1,2 --ranks 2
usage "\-\-epochs: 0 is out of range" --epochs 0
usage "\-\-max-staleness: an option of none of the strategies compared (allreduce, hgc)" \
    --strategies allreduce,hgc --max-staleness 2
usage "\-\-max-staleness: 'x' is not an integer" --strategies inhad --max-staleness x
printf 'max-staleness = 2\n' >sopt.cfg
usage "sopt.cfg sets max-staleness, an option of some strategies: give it on the command line" \
    --strategies inhad --config sopt.cfg
HET_MPI_TIMEOUT=60 het_mpirun 2 "$HETRAIN" compare "${COMMON[@]}" >m.out 2>m.err
rc=$?
[ $rc -eq 2 ] && grep -q "not under mpirun" m.err || fail "compare under mpirun: exit $rc, $(cat m.err)"
[ ! -e compare ] || fail "compare under mpirun created its output folder"

[ $failures -eq 0 ] && echo "test_compare: passed" || exit 1

#!/usr/bin/env bash
# Every writer replaces its file through core/outfile.c (a temp file, fsync, rename, fsync of
# the directory): a process killed with SIGKILL at any moment leaves the file it was replacing
# either as it was or whole and new, never half written. For each writer (checkpoint, ONNX and
# safetensors exports, trace, speeds file, cost table, platform file and hostfile, compare's
# tables and plots) the command runs once to completion (the new file, and its duration T),
# then again and again from the old file, killed with kill -9 after delays spread over the
# run and its end (where the write is), and the file is compared with the old and the new one
# (or, where it holds timings, checked to be complete). A temp file left behind is allowed
# (SIGKILL cannot be caught); it is counted, to show that kills landed during writes.
# Env: HETRAIN, HET_BUILD_DIR (test_trace_json, the trace's JSON checker).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
CHECKER=${HET_BUILD_DIR:?set HET_BUILD_DIR}/test_trace_json
. "$(dirname "$0")/no_leaks.sh"
T=$(mktemp -d /tmp/het_killw_XXXXXX)
export KW_PIDS=$T/pids
: >"$KW_PIDS"
cleanup() { # compare's runs outlive a killed compare: end them by their pids
    local p
    for p in $(cat "$KW_PIDS" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
KILLS=${HET_KILLS:-12} # kills per writer
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# A network of 1.6 M parameters, so that a checkpoint (13 MB) and the exports take a while
printf 'dense out=2048\nrelu\ndense out=classes\n' >big.net
C=(--model-file big.net --data synthetic --train-limit 64 --batch 32 --progress off --seed 3)
E=(--epochs 1 --test-limit 32)

# Checkers: same FILE OLD NEW (exact), or a function FILE NEW saying that FILE is complete.
same() { cmp -s "$1" "$2" || cmp -s "$1" "$3"; }
trace_whole() { "$CHECKER" "$1" >/dev/null 2>&1; }
costs_whole() { [ "$(wc -l <"$1")" = "$(wc -l <"$2")" ] && tail -1 "$1" | grep -q '^range '; }
platform_whole() { [ "$(tail -1 "$1")" = "</platform>" ]; } # host speeds are measured
# compare's outputs: each absent (an earlier comparison's are removed first), the old one, or
# complete: the tables as many lines as the old ones, the plots closed (their points vary)
compare_whole() {
    local f
    for f in compare.md compare.csv accuracy.svg split.svg; do
        [ -e "cmp/$f" ] || continue
        cmp -s "cmp/$f" "old/$f" && continue
        case $f in
        *.svg) [ "$(tail -1 "cmp/$f")" = "</svg>" ] || return 1 ;;
        *) [ "$(wc -l <"cmp/$f")" = "$(wc -l <"old/$f")" ] || return 1 ;;
        esac
    done
}

# kill_loop NAME FILE CHECK -- COMMAND...: FILE is what COMMAND replaces; CHECK is "same" or a
# completeness function.
kill_loop() {
    local name=$1 file=$2 check=$3
    shift 4
    local t0 t1 dur k d pid n_old=0 n_new=0 n_tmp=0
    rm -f "$file" "$file.tmp"
    t0=$(now_ms)
    "$@" >"$name.ref.out" 2>&1 || { fail "$name: the command exited $?: $(tail -2 "$name.ref.out")"; return; }
    t1=$(now_ms)
    dur=$((t1 - t0))
    [ -e "$file" ] || { fail "$name: $file not written"; return; }
    cp "$file" "$name.new"
    printf 'the old %s\n' "$name" >"$name.old"
    for ((k = 0; k < KILLS; k++)); do
        # delays from 0.3 T to 1.2 T: the run's set-up, its work and the write at its end
        d=$((dur * (30 + 90 * k / (KILLS - 1)) / 100))
        cp "$name.old" "$file"
        rm -f "$file.tmp"
        "$@" >/dev/null 2>&1 &
        pid=$!
        sleep "$(printf '%d.%03d' $((d / 1000)) $((d % 1000)))"
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        [ -e "$file.tmp" ] && n_tmp=$((n_tmp + 1))
        if cmp -s "$file" "$name.old"; then
            n_old=$((n_old + 1))
        elif [ "$check" = same ] && cmp -s "$file" "$name.new"; then
            n_new=$((n_new + 1))
        elif [ "$check" != same ] && "$check" "$file" "$name.new"; then
            n_new=$((n_new + 1))
        else
            fail "$name: killed after $d ms of ~$dur ms: $file is neither the old file nor a whole new one ($(wc -c <"$file") bytes, new $(wc -c <"$name.new"))"
            cp "$file" "$name.bad.$k"
        fi
    done
    echo "$name: $KILLS kills over ~$dur ms: old $n_old, new $n_new, temp file left $n_tmp"
}

kill_loop checkpoint a.ckpt same -- "$HETRAIN" train "${C[@]}" "${E[@]}" --checkpoint a.ckpt
cp checkpoint.new ref.ckpt # the whole new one (a.ckpt is the last kill's: maybe the old)
kill_loop onnx a.onnx same -- "$HETRAIN" export --checkpoint ref.ckpt --export-onnx a.onnx
kill_loop safetensors a.st same -- "$HETRAIN" export --checkpoint ref.ckpt --export-safetensors a.st
kill_loop trace a.json trace_whole -- "$HETRAIN" train "${C[@]}" "${E[@]}" --trace a.json
kill_loop speeds speeds.txt same -- "$HETRAIN" calibrate "${C[@]}" --out speeds.txt
kill_loop costs a.costs costs_whole -- "$HETRAIN" calibrate "${C[@]}" --clock virtual --costs-out a.costs
PL=(platform --ranks 4 --ranks-per-node 2 --slowdown 1,1,3,3 --out p.xml --hostfile hosts)
kill_loop platform p.xml platform_whole -- "$HETRAIN" "${PL[@]}"
kill_loop hostfile hosts same -- "$HETRAIN" "${PL[@]}"

# compare: its runs through a launcher that starts the one process itself (no mpirun)
cat >wrap.sh <<'EOF'
#!/usr/bin/env bash
echo $$ >>"$KW_PIDS"
shift
exec "$@"
EOF
CMP=(compare --data synthetic --model mlp --train-limit 64 --test-limit 32 --batch 32 --epochs 1
     --strategies allreduce --slowdown 1 --out cmp --launcher "bash $T/wrap.sh {n}")
if ! "$HETRAIN" "${CMP[@]}" >cmp.ref.out 2>&1; then
    fail "compare exited $?: $(tail -2 cmp.ref.out)"
    exit 1
fi
mkdir -p old && cp cmp/compare.md cmp/compare.csv cmp/accuracy.svg cmp/split.svg old/
t0=$(now_ms)
"$HETRAIN" "${CMP[@]}" >/dev/null 2>&1
dur=$(($(now_ms) - t0))
n_bad=0
for ((k = 0; k < KILLS; k++)); do
    d=$((dur * (30 + 90 * k / (KILLS - 1)) / 100))
    cp old/* cmp/
    "$HETRAIN" "${CMP[@]}" >/dev/null 2>&1 &
    pid=$!
    sleep "$(printf '%d.%03d' $((d / 1000)) $((d % 1000)))"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    compare_whole || { fail "compare: killed after $d ms of ~$dur ms: a table or plot half written: $(wc -l cmp/*.md cmp/*.csv cmp/*.svg | tr '\n' ' ')"; n_bad=$((n_bad + 1)); }
    for p in $(cat "$KW_PIDS"); do # the run a killed compare left: ended before the next one
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    done
done
echo "compare: $KILLS kills over ~$dur ms: $n_bad with a table or plot half written"

[ $failures -eq 0 ] && echo "test_kill_writes: every writer leaves the old file or the whole new one after kill -9"
exit $((failures > 0))

#!/usr/bin/env bash
# A strategy's own options on the command line (src/strategy/strategy.h, het_strategy_opt):
# --help lists them under their strategy, a bad value or an option of another strategy exits 2
# with one line on stderr and nothing on stdout (from the command line, a config file, or on
# top of a checkpoint's strategy), and a set option shows in the run's config line.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
T=$(mktemp -d /tmp/het_cli_sopt_XXXXXX)
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
COMMON=(--model mlp --data synthetic --train-limit 128 --test-limit 64 --epochs 1 --progress off)

# expect_usage "PATTERN IN STDERR" ARGS...
expect_usage() {
    local want=$1
    shift
    "$HETRAIN" "$@" >"$T/out" 2>"$T/err"
    local rc=$? lines
    lines=$(wc -l <"$T/err")
    if [ $rc -ne 2 ] || [ -s "$T/out" ] || [ "$lines" -ne 1 ] || ! grep -q -- "$want" "$T/err"; then
        fail "hetrain $*: rc $rc (expected 2), stdout $(wc -c <"$T/out") bytes," \
             "stderr $lines lines: $(cat "$T/err")"
    fi
}

# --help: a heading for asp, each of its options with metavar, help and default
"$HETRAIN" train --help >"$T/help" 2>&1 || fail "train --help: rc $?"
grep -q '^options of --strategy asp: ' "$T/help" || fail "--help has no heading for asp"
for want in '--ps-rank N .*parameter server.*(default -1)$' '--ps-shards K .*(default 1)$' \
            '--max-staleness N .*(default -1)$' '--staleness-lr on|off .*(default off)$'; do
    sed -n '/^options of --strategy asp/,/^$/p' "$T/help" | grep -q -- "$want" ||
        fail "--help under asp lacks '$want'"
done

msg="ps-rank: an option of --strategy asp or inhad, not of allreduce"
expect_usage "^hetrain train: $msg\$" train "${COMMON[@]}" --strategy allreduce --ps-rank 1
expect_usage "^hetrain train: ps-rank: an option of --strategy asp or inhad, not of hgc\$" \
    train "${COMMON[@]}" --strategy hgc --ps-rank=1
expect_usage "^hetrain train: --max-staleness: 'x' is not an integer\$" \
    train --strategy asp --max-staleness x
expect_usage "^hetrain train: --ps-shards: 65 is out of range, expected \[1, 64\]\$" \
    train --strategy asp --ps-shards 65
expect_usage "^hetrain train: --staleness-lr: unknown value 'yes', expected off or on\$" \
    train --strategy asp --staleness-lr yes
expect_usage "^hetrain train: --ps-rank: missing value\$" train --strategy asp --ps-rank
expect_usage "unknown option --no-such-option" train --no-such-option 1
expect_usage "option --ps-rank does not apply to this command" eval --checkpoint x --ps-rank 1
# flags of a strategy (HET_SOPT_BOOL) take no value word: the next option is read as one
expect_usage "^hetrain train: --epochs: 0 is out of range" \
    train --strategy daso --daso-merge-last --epochs 0
expect_usage "^hetrain train: unexpected argument 'x'" train --strategy hgc --rebalance x
expect_usage "^hetrain train: --rebalance: 'x' is not a boolean, expected true or false\$" \
    train --strategy hgc --rebalance=x
expect_usage "^hetrain train: rebalance: an option of --strategy hgc, not of allreduce\$" \
    train "${COMMON[@]}" --rebalance
expect_usage "^hetrain train: --daso-plateau-threshold: 1 is out of range, expected \[0, 1)\$" \
    train --strategy daso --daso-plateau-threshold 1
sed -n '/^options of --strategy daso/,/^$/p' "$T/help" | grep -q -- '--daso-merge-last  .*merge' ||
    fail "--help under daso lacks the flag --daso-merge-last"
sed -n '/^options of --strategy hgc/,/^$/p' "$T/help" |
    grep -q -- '--rebalance-threshold X .*(default 0.1)$' ||
    fail "--help under hgc lacks --rebalance-threshold"
# a config file reaches the same checks
printf 'strategy = asp\nps-rank = 1\nps-rank = 2\n' >"$T/twice.cfg"
expect_usage "twice.cfg:3: ps-rank given twice (line 2)" train --config "$T/twice.cfg"
printf 'max-staleness = -5\n' >"$T/bad.cfg"
expect_usage "bad.cfg:1: max-staleness: -5 is out of range, expected \[-1, 1000000\]" \
    train --config "$T/bad.cfg"
printf 'max-staleness = 3\n' >"$T/other.cfg"
expect_usage "^hetrain train: max-staleness: an option of --strategy asp or inhad, not of allreduce\$" \
    train "${COMMON[@]}" --config "$T/other.cfg"

# resumed: the strategy comes from the checkpoint, and the options set must be its
"$HETRAIN" train "${COMMON[@]}" --checkpoint "$T/a.ckpt" --quiet >"$T/out" 2>&1 ||
    fail "allreduce run with a checkpoint: $(cat "$T/out")"
expect_usage "^hetrain train: $msg\$" train "${COMMON[@]}" --epochs 2 --resume \
    --checkpoint "$T/a.ckpt" --ps-rank 0

# a set option is part of the run's configuration line (asp may refuse to run: not checked)
"$HETRAIN" train "${COMMON[@]}" --strategy asp --config "$T/other.cfg" --ps-rank 0 \
    >"$T/out" 2>&1
grep -q '^config: .* strategy=asp .* max-staleness=3 ps-rank=0$' "$T/out" ||
    fail "the config line lacks the options: $(grep '^config:' "$T/out")"

if [ $failures -ne 0 ]; then
    echo "test_cli_sopt: $failures failed" >&2
    exit 1
fi
echo "test_cli_sopt: all passed"

#!/usr/bin/env bash
# Usage errors of hetrain: each must exit 2 with exactly one line on stderr and nothing on
# stdout. Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
# Open MPI's initialization leaks by design; under AddressSanitizer only the leak report is off
# (the unit tests check the library for leaks without MPI).
. "$(dirname "$0")/no_leaks.sh"
T=$(mktemp -d /tmp/het_cli_err_XXXXXX)
trap 'rm -rf "$T"' EXIT
failures=0

# expect_usage "PATTERN IN STDERR" ARGS...
expect_usage() {
    local want=$1
    shift
    "$HETRAIN" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    local lines
    lines=$(wc -l <"$T/err")
    if [ $rc -ne 2 ] || [ -s "$T/out" ] || [ "$lines" -ne 1 ] || ! grep -q -- "$want" "$T/err"; then
        echo "FAIL: hetrain $*: rc $rc (expected 2), stdout $(wc -c <"$T/out") bytes," \
             "stderr $lines lines: $(cat "$T/err")" >&2
        failures=$((failures + 1))
    fi
}

expect_usage "missing command"
expect_usage "unknown command 'fit'" fit
expect_usage "unknown option --foo" train --foo 1
expect_usage "unexpected argument 'extra'" train extra
expect_usage "unexpected argument '-x'" train -x
expect_usage "\-\-epochs: 0 is out of range" train --epochs 0
expect_usage "\-\-epochs: 'ten' is not an integer" train --epochs ten
expect_usage "\-\-epochs: missing value" train --epochs
expect_usage "\-\-epochs: missing value" train --epochs --batch 8
expect_usage "\-\-batch: -1 is out of range" train --batch -1
expect_usage "\-\-batch: '2.5' is not an integer" train --batch=2.5
expect_usage "\-\-lr: 'abc' is not a number" train --lr abc
expect_usage "\-\-lr: 0 is out of range" train --lr 0
expect_usage "\-\-lr: 'nan' is not a number" train --lr nan
expect_usage "\-\-momentum: 1.5 is out of range" train --momentum 1.5
# judged as the float that is stored: 1e-50 would be 0, 0.9999999999 would be 1 (fuzz_config)
expect_usage "\-\-lr: 1e-50 is out of range, expected > 0" train --lr 1e-50
expect_usage "\-\-momentum: 0.9999999999 is out of range, expected \[0, 1)" train --momentum 0.9999999999
expect_usage "\-\-seed: '-1' is not an integer" train --seed -1
expect_usage "\-\-seed: 99999999999999999999 is out of range" train --seed 99999999999999999999
expect_usage "\-\-threads: 0 is out of range" train --threads 0
expect_usage "\-\-model: unknown model 'vgg'" train --model vgg
expect_usage "\-\-data: unknown dataset 'imagenet'" train --data imagenet
expect_usage "\-\-schedule: unknown schedule 'linear'" train --schedule linear
expect_usage "\-\-optimizer: unknown optimizer 'rmsprop'" train --optimizer rmsprop
expect_usage "\-\-progress: unknown mode" train --progress sometimes
expect_usage "\-\-nesterov: 'maybe' is not a boolean" train --nesterov=maybe
expect_usage "nesterov" train --nesterov --momentum 0
expect_usage "needs --checkpoint" train --resume
expect_usage "does not apply" eval --checkpoint x.ckpt --epochs 3
expect_usage "\-\-checkpoint FILE is required" eval
expect_usage "\-\-export-safetensors FILE or \-\-export-onnx FILE is required" export --checkpoint x.ckpt
expect_usage "cannot open" train --config "$T/none.conf"
expect_usage "$T: is a directory, expected a config file" train --config "$T"
printf 'epochs = 2\nwarp = 9\n' >"$T/bad.conf"
expect_usage "bad.conf:2: unknown key 'warp'" train --config "$T/bad.conf"
# a key twice in one file, and a second --config, are refused (shared FINDINGS #9)
printf 'model = lenet5\nbatch = 32\nbatch = 16\n' >"$T/dup.cfg"
expect_usage "dup.cfg:3: batch given twice (line 2)" train --config "$T/dup.cfg"
printf '# spelled two ways\ntrain_limit = 8\n\ntrain-limit 9\n' >"$T/dup2.cfg"
expect_usage "dup2.cfg:4: train-limit given twice (line 2)" train --config "$T/dup2.cfg"
# emulated network values that would make one transfer take hours (shared FINDINGS #7)
expect_usage "\-\-net-bw: 1e-300 is out of range, expected 0 (off) or 10000..1e+15 bytes/s" \
    train --net-bw 1e-300
expect_usage "\-\-net-bw: 9999 is out of range" train --net-bw 9999
expect_usage "\-\-net-bw: 2000T is out of range" train --net-bw 2000T
expect_usage "\-\-net-lat: 1000 is out of range, expected \[0, 10\]" train --net-lat 1000
expect_usage "\-\-net-lat: 10.5 is out of range" train --net-lat 10.5
printf 'epochs = 1\n' >"$T/ok.cfg"
expect_usage "\-\-config given twice" train --config "$T/ok.cfg" --config "$T/ok.cfg"
expect_usage "\-\-config given twice" eval --config="$T/ok.cfg" --checkpoint x --config "$T/bad.conf"

# the catalog's keys (docs/DATA.md): a shape that is not CxHxW, more channels than the
# per-channel normalization holds, one class, synthetic's keys on another dataset, idx without
# a directory
expect_usage "synthetic-shape: '3x8', expected CxHxW" train --data synthetic --synthetic-shape 3x8
expect_usage "synthetic-shape: '3xax8', expected CxHxW" train --data synthetic --synthetic-shape 3xax8
expect_usage "synthetic-shape: 4x8x8, expected 1..3 channels" \
    train --data synthetic --synthetic-shape 4x8x8
expect_usage "classes: 1, expected 2..256" train --data synthetic --classes 1
expect_usage "synthetic-shape: applies to --data synthetic, not fashion-mnist" \
    train --synthetic-shape 1x28x28
expect_usage "idx has no default directory: pass --data-dir DIR" train --data idx

if [ $failures -ne 0 ]; then
    echo "test_cli_errors: $failures failed" >&2
    exit 1
fi
echo "test_cli_errors: all passed"

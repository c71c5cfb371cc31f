#!/usr/bin/env bash
# Platform files end to end, under real mpirun (emul/platform.c, cli/platform.c, trainer.c):
# - `hetrain platform` writes the shorthand's cluster (2 nodes x 2 ranks, the second node 3x
#   slower, 1 Gbit/s, 50 us) as a platform file and a hostfile; `info --platform` shows its hosts
#   and which ranks share them;
# - training on that file (--platform FILE --hostfile HOSTS) is the shorthand's run: the same
#   weights bit for bit and the same virtual times (to 1e-9: latencies are floats in the
#   options), on the shipped cost table;
# - host-independent costs: the same run with the shipped table and with that table rescaled by
#   2 (every second doubled, its reference rate halved: a host twice as slow measured it) gives
#   identical virtual times on the platform;
# - a hand-written heterogeneous platform (two clusters of 100 and 25 Gflop/s joined by a slow
#   link): ranks go where it says, the slow host's rank computes 4x the fast ones' (virtual,
#   shipped table; the metrics print 6 digits), and the run says that the routes differ;
# - --net-factors smpi (SMPI's message-size factors) written into the file's <config>: the run
#   on it equals the shorthand's with --net-factors smpi (times), the weights stay those without,
#   and the epoch is slower than without them;
# - refusals, one line each: --platform with --slowdown, --hostfile without --platform, a broken
#   platform file (file and line), a node of two slowdowns in `hetrain platform`.
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
het_mpi_np_ok 4 || { echo "test_cli_platform: skipped: 4 ranks are more than the cores ($het_mpi_flavor busy-polls)"; exit 77; }
T=$(mktemp -d /tmp/het_platform_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
mpi() { local P=$1; shift; het_mpirun "$P" "$HETRAIN" "$@"; }
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a / b - 1; exit !(d <= t && d >= -t) }'; }
json_num() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p"; }
json_arr() { grep '"type":"epoch"' "$1" | tail -1 | sed -n "s/.*\"$2\":\\[\\([^]]*\\)\\].*/\\1/p"; }
COMMON=(--model lenet5 --data synthetic --train-limit 1024 --test-limit 128 --seed 3 --batch 32
        --epochs 1 --progress off --clock virtual --compute-cost shipped)
SHORT=(--ranks-per-node 2 --slowdown 1,1,3,3 --net-bw 125M --net-lat 50e-6)

# ---- hetrain platform: the shorthand as a file ----
"$HETRAIN" platform --ranks 4 "${SHORT[@]}" --host-speed shipped --model lenet5 \
    --out plat.xml --hostfile hosts >plat.out 2>&1 || fail "hetrain platform exited $?: $(cat plat.out)"
[ "$(tr '\n' ' ' <hosts)" = "node0 node0 node1 node1 " ] || fail "hostfile: $(tr '\n' ' ' <hosts)"
grep -q '<host id="node1" speed="[0-9.e+]*f" core="2"/>' plat.xml || fail "plat.xml: $(grep host plat.xml)"
"$HETRAIN" info --platform plat.xml --hostfile hosts >info.out 2>&1 || fail "info --platform exited $?"
grep -q '^  node1 .* 2 .* 2,3$' info.out || fail "info: node1 with ranks 2,3: $(grep node1 info.out | head -1)"
grep -q 'between nodes 5e-05 s + bytes / 1.25e+08 B/s' info.out || fail "info: $(tail -1 info.out)"

# ---- the platform run is the shorthand's run ----
mpi 4 train "${COMMON[@]}" "${SHORT[@]}" --metrics s.jsonl --export-safetensors s.st >s.out 2>&1 ||
    fail "shorthand run exited $?: $(tail -2 s.out)"
mpi 4 train "${COMMON[@]}" --platform plat.xml --hostfile hosts --metrics p.jsonl \
    --export-safetensors p.st >p.out 2>&1 || fail "platform run exited $?: $(tail -2 p.out)"
cmp -s s.st p.st || fail "the platform run's weights differ from the shorthand's"
vs=$(json_num s.jsonl vtime_s) vp=$(json_num p.jsonl vtime_s)
[ -n "$vs" ] && [ -n "$vp" ] && within "$vp" "$vs" 1e-9 || fail "virtual time: platform $vp s, shorthand $vs s"
cs=$(json_arr s.jsonl compute_s) cp=$(json_arr p.jsonl compute_s)
for r in 1 2 3 4; do
    within "$(echo "$cp" | cut -d, -f$r)" "$(echo "$cs" | cut -d, -f$r)" 1e-9 ||
        fail "rank $((r - 1)) compute: platform [$cp], shorthand [$cs]"
done
grep -q '^platform: plat.xml, 2 hosts: ranks on hosts 0:node0.* 3:node1' p.out || fail "no platform line: $(grep -m1 platform p.out)"
echo "test_cli_platform: a platform from hetrain platform runs as the shorthand does (weights, times)"

# ---- SMPI's message-size factors: --net-factors smpi is the platform file's <config> ----
"$HETRAIN" platform --ranks 4 "${SHORT[@]}" --net-factors smpi --host-speed shipped --model lenet5 \
    --out platf.xml --hostfile hosts >platf.out 2>&1 || fail "hetrain platform --net-factors smpi exited $?: $(cat platf.out)"
grep -q '<prop id="smpi/lat-factor" value="65472:11.6436;15424:3.48845;' platf.xml &&
    grep -q '<prop id="smpi/bw-factor" value="65472:0.940694;' platf.xml ||
    fail "platf.xml has no SMPI factors: $(grep -A3 '<config' platf.xml)"
mpi 4 train "${COMMON[@]}" "${SHORT[@]}" --net-factors smpi --metrics sf.jsonl \
    --export-safetensors sf.st >sf.out 2>&1 || fail "--net-factors smpi exited $?: $(tail -2 sf.out)"
mpi 4 train "${COMMON[@]}" --platform platf.xml --hostfile hosts --metrics pf.jsonl \
    --export-safetensors pf.st >pf.out 2>&1 || fail "platform with factors exited $?: $(tail -2 pf.out)"
cmp -s sf.st s.st && cmp -s pf.st s.st || fail "the factors changed the weights"
vf=$(json_num sf.jsonl vtime_s) vpf=$(json_num pf.jsonl vtime_s)
[ -n "$vf" ] && within "$vpf" "$vf" 1e-7 || fail "virtual time with factors (to 1e-7: the option's float latency, multiplied by up to 11.6): platform $vpf s, shorthand $vf s"
# SMPI's factors slow every message of these sizes (latency x 1.6-11.6, bandwidth x 0.34-0.94)
awk -v a="$vf" -v b="$vs" 'BEGIN { exit !(a > b) }' || fail "factors: epoch $vf s, without $vs s"
"$HETRAIN" train --model mlp --data synthetic --train-limit 64 --epochs 1 --net-factors tcp \
    >nf.out 2>&1 && fail "--net-factors tcp accepted"
grep -q "net-factors: unknown .* 'tcp', expected none or smpi" nf.out || fail "--net-factors tcp: $(cat nf.out)"

# ---- a table measured on a host twice as slow charges the same virtual times ----
src=$(grep -l '^model lenet5$' "${HET_SOURCE_DIR:-$(dirname "$0")/..}"/costs/*.costs | head -1)
awk '/^(fb|opt|step) / { printf "%s %.17g %.17g\n", $1, 2 * $2, 2 * $3; next }
     /^layer / { printf "layer %s %.17g %.17g\n", $2, 2 * $3, 2 * $4; next }
     /^range / { printf "range %s %.17g %.17g %.17g %.17g\n", $2, 2 * $3, 2 * $4, 2 * $5, 2 * $6; next }
     /^ref / { printf "ref %s %.17g\n", $2, $3 / 2; next } { print }' "$src" >slow.costs
grep -q '^ref sgemm512 ' slow.costs && [ "$(wc -l <slow.costs)" = "$(wc -l <"$src")" ] || fail "slow.costs: $(head -8 slow.costs)"
mpi 4 train "${COMMON[@]}" --compute-cost calibrated:slow.costs --platform plat.xml --hostfile hosts \
    --metrics x.jsonl >x.out 2>&1 || fail "rescaled table run exited $?: $(tail -2 x.out)"
vx=$(json_num x.jsonl vtime_s)
[ -n "$vx" ] && [ "$vx" = "$vp" ] || fail "the rescaled table: virtual time $vx s, the shipped table's $vp s"
[ "$(json_arr x.jsonl compute_s)" = "$cp" ] || fail "the rescaled table: compute [$(json_arr x.jsonl compute_s)], the shipped table's [$cp]"
echo "test_cli_platform: a table 2x slower with half the reference rate: identical virtual times"

# ---- a heterogeneous platform by hand: two clusters and a slow link ----
cat >two.xml <<'EOF'
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="world" routing="Full">
    <cluster id="fast" prefix="f" suffix="" radical="0-1" speed="100Gf" core="1" bw="10Gbps"
             lat="10us"/>
    <cluster id="slow" prefix="s" suffix="" radical="0" speed="25Gf" core="1" bw="1Gbps"
             lat="25us"/>
    <link id="wan" bandwidth="12.5MBps" latency="2ms"/>
    <zoneRoute src="fast" dst="slow" gw_src="ffast_router" gw_dst="sslow_router">
      <link_ctn id="wan"/>
    </zoneRoute>
  </zone>
</platform>
EOF
# (batch 30 over 3 ranks, 960 samples: every rank computes the same samples each step)
mpi 3 train "${COMMON[@]}" --batch 30 --train-limit 960 --platform two.xml --metrics h.jsonl >h.out 2>&1 ||
    fail "two clusters: exited $?: $(tail -2 h.out)"
grep -q 'ranks on hosts 0:f0(100Gf) 1:f1(100Gf) 2:s0(25Gf)' h.out || fail "two clusters: $(grep -m1 '^platform' h.out)"
grep -q 'the routes differ' h.out || fail "two clusters: no word on the routes differing: $(grep -m2 '^platform' h.out | tail -1)"
ch=$(json_arr h.jsonl compute_s)
within "$(echo "$ch" | cut -d, -f3)" "$(awk -v c="$(echo "$ch" | cut -d, -f1)" 'BEGIN { print 4 * c }')" 1e-5 ||
    fail "two clusters: the 25 Gf rank computed [$ch], expected 4x the 100 Gf ranks'"
echo "test_cli_platform: two clusters: ranks where the file says, the slow host 4x"

# ---- refusals ----
refused() { # what pattern status cmd...
    local what=$1 pat=$2 want=$3; shift 3
    "$@" >bad.out 2>&1
    local rc=$?
    [ $rc -eq "$want" ] && grep -q "$pat" bad.out && [ "$(grep -c '^hetrain' bad.out)" -eq 1 ] ||
        fail "$what: exit $rc, $(head -3 bad.out)"
}
refused "--platform with --slowdown" "platform: plat.xml describes the cluster; --slowdown would change it" 2 \
    "$HETRAIN" train "${COMMON[@]}" --platform plat.xml --slowdown 2
refused "--hostfile alone" "hostfile: places ranks on a platform's hosts; add --platform" 2 \
    "$HETRAIN" train "${COMMON[@]}" --hostfile hosts
sed 's/core="2"/core="two"/' plat.xml >broken.xml
ln=$(grep -n 'core="two"' broken.xml | head -1 | cut -d: -f1) # the first host's line
refused "a broken file" "broken.xml:$ln: <host>: core=\"two\": expected an integer" 1 \
    mpi 2 train "${COMMON[@]}" --platform broken.xml
refused "a node of two speeds" "node 1 holds ranks of slowdown 1 and 3" 1 \
    "$HETRAIN" platform --ranks 4 --ranks-per-node 2 --slowdown 1,1,1,3 --out no.xml
[ ! -e no.xml ] || fail "a refused platform left no.xml"

[ $failures -eq 0 ] || { echo "test_cli_platform: $failures failure(s)" >&2; exit 1; }
echo "test_cli_platform: all checks passed"

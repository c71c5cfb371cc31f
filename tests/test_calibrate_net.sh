#!/usr/bin/env bash
# hetrain calibrate --network end to end, under real mpirun: 2 ranks on two emulated nodes
# (--ranks-per-node 1) ping-pong 8 B .. 4 MiB over this host's MPI transport and write the
# fitted factors; the file has the four keys, 15 pieces each, factors > 0, and the printed
# table's fitted column returns the measured one (the fit passes through every measured time:
# within the print's 4 digits, unless noise clamped a piece); the reference link is the given
# --net-lat / --net-bw. hetrain platform --factors FILE puts them into the platform file's
# <config>, which hetrain info --platform reads back, and the link from the file where
# --net-bw is not given. Refused with one line: 1 rank, --reps 0, a bad factors file (its file
# and line). No timing is checked (the machine's own transport, whatever its speed).
# Env: HETRAIN (the binary).
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
. "$(dirname "$0")/no_leaks.sh"
. "$(dirname "$0")/mpi.sh"
het_mpi_found || { echo "FAIL: $HET_MPIEXEC not found" >&2; exit 1; }
T=$(mktemp -d /tmp/het_calnet_XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

het_mpirun 2 "$HETRAIN" calibrate --network --reps 5 --ranks-per-node 1 --net-lat 50e-6 \
    --net-bw 125M --out net.factors >cal.out 2>&1 || fail "calibrate --network exited $?: $(tail -3 cal.out)"
grep -q 'ranks 0 and 1 (on two nodes)' cal.out || fail "the pair measured: $(head -3 cal.out)"
grep -q 'reference link: 5e-05 s + bytes / 1.25e+08 B/s (given)' cal.out || fail "reference link: $(grep reference cal.out)"
awk -F= '$1 == "net-lat" { l = $2 } $1 == "net-bw" { b = $2 }
     END { exit !(l > 4.9999e-5 && l < 5.0001e-5 && b == 125000000) }' net.factors ||
    fail "net.factors: the reference link is not the given one: $(cat net.factors)"
for k in smpi/lat-factor smpi/bw-factor; do
    v=$(sed -n "s|^$k=||p" net.factors)
    n=$(echo "$v" | tr ';' '\n' | grep -c ':')
    [ "$n" = 15 ] || fail "$k: $n pieces, expected 15: $v"
    echo "$v" | tr ';' '\n' | awk -F: '!($2 > 0) { bad = 1 } END { exit bad }' || fail "$k: a factor not > 0: $v"
done
# the fitted column against the measured one (4 significant digits printed), but where a factor
# is clamped to [1e-3, 1e3] (netfit.c: noisy round trips, as MPICH's on 2 busy cores give)
awk '$1 ~ /^[0-9]+$/ && NF == 5 { n++; d = $3 / $2 - 1; if (d < 0) d = -d
       if (d > 2e-3 && $4 != 0.001 && $4 != 1000 && $5 != 0.001 && $5 != 1000) bad++ }
     END { exit !(n == 16 && !bad) }' cal.out || fail "the fit does not return the measured times: $(cat cal.out)"

"$HETRAIN" platform --ranks 4 --ranks-per-node 2 --net-lat 50e-6 --factors net.factors \
    --host-speed 1e9 --out plat.xml >plat.out 2>&1 || fail "platform --factors exited $?: $(cat plat.out)"
lf=$(sed -n 's|^smpi/lat-factor=||p' net.factors)
grep -q "<prop id=\"smpi/lat-factor\" value=\"$lf\"/>" plat.xml || fail "plat.xml's lat factor: $(grep lat-factor plat.xml), expected $lf"
grep -q 'bandwidth="125000000Bps"' plat.xml || fail "the link's bandwidth from the factors file: $(grep -m1 '<link' plat.xml)"
"$HETRAIN" info --platform plat.xml >info.out 2>&1 || fail "info --platform exited $?: $(cat info.out)"
grep -qi 'factor' info.out || fail "info --platform does not show the factors: $(cat info.out)"

# refusals, one line each
"$HETRAIN" calibrate --network --out x >one.out 2>&1 && fail "calibrate --network on 1 rank succeeded"
grep -q '1 rank; run it under the launcher' one.out || fail "1 rank: $(cat one.out)"
"$HETRAIN" calibrate --network --reps 0 >reps.out 2>&1 && fail "--reps 0 accepted"
grep -q -- '--reps' reps.out || fail "--reps 0: $(cat reps.out)"
printf 'net-lat=5e-05\nnet-bw=oops\n' >bad.factors
"$HETRAIN" platform --ranks 2 --ranks-per-node 1 --factors bad.factors --host-speed 1e9 \
    --out p2.xml >bad.out 2>&1 && fail "a bad factors file accepted"
grep -q 'bad.factors:2: net-bw' bad.out || fail "bad factors file: $(cat bad.out)"
[ -e p2.xml ] && fail "a bad factors file left p2.xml"

[ $failures -eq 0 ] && echo "test_calibrate_net: passed"
exit $((failures > 0))

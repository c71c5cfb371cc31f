#!/usr/bin/env bash
# The virtual cluster (tools/vcluster): 2 hosts (network namespaces, Open MPI over TCP, a
# 1 Gbit/s link), 4 ranks placed across them (--map-by node: ranks 0, 2 on vh1, 1, 3 on vh2)
# train 2 epochs, and the checkpoint equals the one of the same 4-rank run on one host (flat
# all-reduce), or on 2 emulated nodes of the same placement (two-level all-reduce); then the
# cluster comes down and leaves nothing behind. `up` and `down` are idempotent; bad arguments
# are refused. A second cluster (another state folder) is refused, naming the first, which
# stays up, and its `down` removes nothing of the first; a failed `up` (a bad --rate, after
# the namespaces are made) and one refused for a name in use remove only what they made: a
# vh* namespace of someone else survives both. Skipped (exit 77, CTest shows it) where
# namespaces cannot be made (not root, a container without CAP_SYS_ADMIN); without iproute2's
# ip and tc it fails (setup.sh installs them). Env: HETRAIN, HET_SOURCE_DIR.
set -u
HETRAIN=${HETRAIN:?set HETRAIN to the hetrain binary}
VC=${HET_SOURCE_DIR:?}/tools/vcluster
. "$(dirname "$0")/mpi.sh"
export VCLUSTER_DIR=/run/hetrain-vcluster-test
skip() { echo "test_vcluster: SKIPPED: $*"; exit 77; }  # 77: CTest shows it as skipped
[ "$(id -u)" -eq 0 ] || skip "not root"
# ip and tc come with iproute2, which scripts/setup.sh installs: missing, they fail the test
for t in ip tc unshare mpirun; do
    command -v $t >/dev/null 2>&1 || { echo "FAIL: test_vcluster: '$t' not found" >&2; exit 1; }
done
[ "$het_mpi_flavor" = openmpi ] || skip "tools/vcluster runs Open MPI; this build's launcher is $HET_MPIEXEC"
had_run_netns=0; [ -d /run/netns ] && had_run_netns=1
had_etc_netns=0; [ -d /etc/netns ] && had_etc_netns=1
if ! ip netns add hetrain-probe 2>/dev/null; then skip "cannot create a network namespace here"; fi
ip netns del hetrain-probe
# `ip netns add` made /run/netns (a bind mount of itself) for the probe: undo that, so that
# the test can check that vcluster's up/down leaves the machine as it found it
if [ $had_run_netns -eq 0 ]; then umount /run/netns 2>/dev/null; rmdir /run/netns 2>/dev/null; fi
[ -z "$(ip netns list | grep '^vh[0-9]')" ] || skip "namespaces vh* exist already (another vcluster is up)"

T=$(mktemp -d /tmp/het_vcluster_XXXXXX)
foreign=() # vh* namespaces this test makes as someone else's
cleanup() {
    "$VC" down >/dev/null 2>&1
    VCLUSTER_DIR=$T/other "$VC" down >/dev/null 2>&1
    for ns in "${foreign[@]}"; do ip netns del "$ns" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
cd "$T" || exit 1
mounts_before=$(grep -c netns /proc/self/mountinfo)
hosts_before=$(md5sum </etc/hosts)

"$VC" up 1 >o 2>&1 && fail "up 1 accepted"
"$VC" up 2 --speed 1 >o 2>&1 && fail "up with an unknown option accepted"
"$VC" up 2 --rate 1gbit >up.out 2>&1 || { cat up.out; fail "up 2 failed"; exit 1; }
"$VC" up 2 --rate 1gbit >up2.out 2>&1 || fail "second up failed: $(cat up2.out)"
grep -q "already up" up2.out || fail "second up did not say 'already up': $(cat up2.out)"
# a second cluster over the running one: refused, naming it; the first stays up
VCLUSTER_DIR=$T/other "$VC" up 2 >other.out 2>&1 && fail "a second cluster's up accepted"
[ "$(wc -l <other.out)" -eq 1 ] && grep -q "^vcluster: up: a cluster is up already from VCLUSTER_DIR=$VCLUSTER_DIR (bridge vcbr0, hosts vh1 vh2); bring it down first" other.out ||
    fail "second cluster: $(cat other.out)"
[ -e "$T/other" ] && fail "the refused cluster left its state folder"
VCLUSTER_DIR=$T/other "$VC" down >other.out 2>&1 || fail "the other cluster's down: $(cat other.out)"
for ns in vh1 vh2; do ip netns list | grep -qw "^$ns" || fail "namespace $ns of the first cluster gone"; done
ip link show vcbr0 >/dev/null 2>&1 || fail "the first cluster's bridge vcbr0 gone"
"$VC" status >st.out 2>&1 && grep -q "^vcluster: up: vh1 vh2 link 1gbit burst 64kb" st.out ||
    fail "the first cluster's status: $(cat st.out)"
# the bucket tc reports (64kb, rounded by its rate table: 65500b)
tc qdisc show dev vc1-br | grep -Eq "tbf .*rate 1Gbit burst (6[45][0-9]{3}b|64Kb) " ||
    fail "vc1-br's qdisc: $(tc qdisc show dev vc1-br)"

ARGS=(train --model lenet5 --data synthetic --epochs 2 --train-limit 1024 --test-limit 256
      --seed 3 --progress off --threads 1)
# flat: the same ring over the 4 ranks on 2 hosts as on one; hier: the 2 real hosts against 2
# emulated nodes of the same placement (--map-by node = --placement cyclic)
export HET_MPI_TIMEOUT=240
for algo in flat hier; do
    timeout -k 5 240 "$VC" run -np 4 --map-by node "$HETRAIN" "${ARGS[@]}" --allreduce-algo $algo \
        --checkpoint "$T/vc-$algo.ckpt" >vc-$algo.out 2>&1 ||
        fail "4 ranks on the virtual cluster ($algo): $(cat vc-$algo.out)"
    grep -q "^ranks: 4 ranks on 2 nodes.*all-reduce $algo" vc-$algo.out ||
        fail "not 2 nodes, all-reduce $algo: $(grep '^ranks' vc-$algo.out)"
done
het_mpirun 4 "$HETRAIN" "${ARGS[@]}" --allreduce-algo flat --checkpoint "$T/one-flat.ckpt" \
    >one-flat.out 2>&1 || fail "4 ranks on one host: $(cat one-flat.out)"
het_mpirun 4 "$HETRAIN" "${ARGS[@]}" --allreduce-algo hier --ranks-per-node 2 --placement cyclic \
    --checkpoint "$T/one-hier.ckpt" >one-hier.out 2>&1 || fail "4 ranks, 2 emulated nodes: $(cat one-hier.out)"
# the weights (safetensors; the checkpoints also hold the options, which differ for hier)
for algo in flat hier; do
    for run in vc one; do
        "$HETRAIN" export --checkpoint "$run-$algo.ckpt" --export-safetensors "$run-$algo.st" \
            >/dev/null 2>&1 || fail "export $run-$algo.ckpt"
    done
    cmp -s vc-$algo.st one-$algo.st ||
        fail "$algo: the 2-host run differs from the 1-host run: $(grep '^done' vc-$algo.out) vs" \
             "$(grep '^done' one-$algo.out)"
done
cmp -s vc-flat.ckpt one-flat.ckpt || fail "flat: the checkpoints differ"

"$VC" down >d.out 2>&1 || fail "down failed: $(cat d.out)"
"$VC" down >d2.out 2>&1 || fail "second down failed: $(cat d2.out)"
[ -z "$(ip netns list | grep '^vh[0-9]')" ] || fail "namespaces left: $(ip netns list)"
ip link show vcbr0 >/dev/null 2>&1 && fail "bridge vcbr0 left"
ip -o link | grep -q ' vc[0-9]*-br' && fail "veth links left: $(ip -o link | grep ' vc')"
[ "$(grep -c netns /proc/self/mountinfo)" -eq "$mounts_before" ] || fail "netns mounts left"
[ $had_run_netns -eq 1 ] || [ ! -e /run/netns ] || fail "/run/netns left"
[ $had_etc_netns -eq 1 ] || [ ! -e /etc/netns ] || fail "/etc/netns left"
[ "$(md5sum </etc/hosts)" = "$hosts_before" ] || fail "/etc/hosts changed"
[ -e "$VCLUSTER_DIR" ] && fail "state folder $VCLUSTER_DIR left"
"$VC" run -np 2 true >r.out 2>&1 && fail "run with no cluster up accepted"
grep -q "no cluster up" r.out || fail "run with no cluster: $(cat r.out)"

"$VC" up 2 --rate 1gbit --burst lots >burst.out 2>&1 && fail "up with --burst lots accepted"
grep -q "^vcluster: up: --burst expects a size such as 16kb, got 'lots'" burst.out ||
    fail "up --burst lots: $(cat burst.out)"

# a failed up and a refused one remove only what they made: someone else's vh7, vh2 survive
foreign+=(vh7)
ip netns add vh7 || fail "cannot make namespace vh7"
"$VC" up 2 --rate bogus >bad.out 2>&1 && fail "up with --rate bogus accepted"
grep -q "up failed, cleaning up what it made" bad.out || fail "up --rate bogus: $(cat bad.out)"
ip netns list | grep -qw '^vh7' || fail "the failed up removed someone else's namespace vh7"
ip netns list | grep -Eqw '^vh(1|2)' && fail "the failed up left its namespaces: $(ip netns list)"
ip link show vcbr0 >/dev/null 2>&1 && fail "the failed up left bridge vcbr0"
[ -e "$VCLUSTER_DIR" ] && fail "the failed up left its state folder"
foreign+=(vh2)
ip netns add vh2 || fail "cannot make namespace vh2"
"$VC" up 2 >busy.out 2>&1 && fail "up over someone else's namespace vh2 accepted"
grep -q "^vcluster: up: exists already, not made by this cluster .*: namespace vh2;" busy.out ||
    fail "up over vh2: $(cat busy.out)"
for ns in vh2 vh7; do ip netns list | grep -qw "^$ns" || fail "the refused up removed $ns"; done
ip netns list | grep -qw '^vh1' && fail "the refused up made vh1"
for ns in "${foreign[@]}"; do ip netns del "$ns"; done
foreign=()
if [ $had_run_netns -eq 0 ]; then umount /run/netns 2>/dev/null; rmdir /run/netns 2>/dev/null; fi

[ $failures -eq 0 ] && echo "test_vcluster: passed" || exit 1

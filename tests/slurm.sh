# Sourced by tests/test_slurm.sh: a real Slurm on this one host, made and ended by the test.
# Debian's slurm-wlm (slurmctld, slurmd, srun, sbatch, salloc) and munge, as root; everything
# in a folder of the test's: munged on its own socket and key (not the system's), a
# slurm.conf on loopback (SLURM_CONF, exported), NODES slurmd, each a node named n1 ... nN
# on its own port (`slurmd -N`, as README's two-node lines need), all on this host with its
# cores (nproc each; config_overrides, since they share them). Daemons run in the foreground
# of this shell (their pids in het_slurm_pids), so het_slurm_down ends exactly them. Each
# slurmd runs in a UTS namespace of its own with its node's name as hostname (unshare), as
# nodes of a real cluster have, so that its ranks are another host to Open MPI and hetrain.
#   het_slurm_missing     prints what is missing to run Slurm here ("" when nothing)
#   het_slurm_up DIR N    starts munged, slurmctld and N slurmd; 0 once every node is idle
#                         (within 20 s), else 1 with the reason in het_slurm_why
#   het_slurm_down        ends them (SIGTERM, SIGKILL after 5 s), waits for them; safe to repeat
het_slurm_pids=()
het_slurm_dir=
het_slurm_why=

het_slurm_missing() {
    local t miss=()
    [ "$(id -u)" -eq 0 ] || miss+=("root (slurmd runs the jobs' processes)")
    for t in munged slurmctld slurmd srun sbatch salloc sinfo scontrol scancel unshare; do
        command -v "$t" >/dev/null 2>&1 || [ -x "/usr/sbin/$t" ] || miss+=("$t")
    done
    echo "${miss[*]}"
}

# The next TCP port that nothing listens on, counting up from a base that differs between
# runs (het_slurm_next; in this shell, not a subshell, so that no port is given twice).
het_slurm_next=
het_slurm_port() {
    [ -n "$het_slurm_next" ] || het_slurm_next=$((20000 + RANDOM % 30000))
    while ss -Hltn "sport = :$het_slurm_next" 2>/dev/null | grep -q .; do
        het_slurm_next=$((het_slurm_next + 1))
    done
    het_slurm_port_got=$het_slurm_next
    het_slurm_next=$((het_slurm_next + 1))
}

het_slurm_up() {
    local d=$1 n=$2 i host cpus ctld_port slurmd_port
    het_slurm_dir=$d
    PATH=$PATH:/usr/sbin
    mkdir -p "$d/munge" "$d/state" || { het_slurm_why="cannot make $d"; return 1; }
    chmod 755 "$d" "$d/munge"
    head -c 1024 /dev/urandom >"$d/munge.key" && chmod 600 "$d/munge.key"
    munged -F -f --socket="$d/munge/sock" --key-file="$d/munge.key" \
        --log-file="$d/munged.log" --pid-file="$d/munge/pid" --seed-file="$d/munge/seed" \
        >"$d/munged.out" 2>&1 &
    het_slurm_pids+=($!)
    host=$(hostname)
    cpus=$(nproc)
    het_slurm_port
    ctld_port=$het_slurm_port_got
    het_slurm_port
    slurmd_port=$het_slurm_port_got
    local node_ports=()
    for i in $(seq "$n"); do
        het_slurm_port
        node_ports+=("$het_slurm_port_got")
    done
    {
        echo "# one-host Slurm of tests/slurm.sh"
        echo "ClusterName=hettest"
        echo "SlurmctldHost=$host(127.0.0.1)"
        echo "SlurmctldPort=$ctld_port"
        echo "SlurmdPort=$slurmd_port"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "AuthInfo=socket=$d/munge/sock"
        echo "StateSaveLocation=$d/state"
        echo "SlurmdSpoolDir=$d/spool/%n"
        echo "TmpFS=$d/tmp/%n" # the PMIx plugin's client folders: one per node
        echo "SlurmctldPidFile=$d/slurmctld.pid"
        echo "SlurmdPidFile=$d/slurmd-%n.pid"
        echo "SlurmctldLogFile=$d/slurmctld.log"
        echo "SlurmdLogFile=$d/slurmd-%n.log"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_CPU"
        echo "SchedulerType=sched/builtin"
        echo "MpiDefault=none" # Slurm's default: README's srun lines say --mpi=pmix
        echo "JobCompType=jobcomp/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "SwitchType=switch/none"
        echo "MailProg=/bin/true"
        echo "ReturnToService=2"
        echo "SlurmdParameters=config_overrides"
        echo "InactiveLimit=0"
        echo "KillWait=5"
        for i in $(seq "$n"); do
            echo "NodeName=n$i NodeHostname=n$i NodeAddr=127.0.0.1" \
                "Port=${node_ports[$((i - 1))]} CPUs=$cpus State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    } >"$d/slurm.conf"
    export SLURM_CONF=$d/slurm.conf
    for _ in $(seq 50); do [ -S "$d/munge/sock" ] && break; sleep 0.1; done
    [ -S "$d/munge/sock" ] || { het_slurm_why="munged did not start: $(tail -3 "$d/munged.out")"
                                return 1; }
    slurmctld -D -i >"$d/slurmctld.out" 2>&1 &
    het_slurm_pids+=($!)
    for i in $(seq "$n"); do
        mkdir -p "$d/spool/n$i" "$d/tmp/n$i"
        # its own hostname (a UTS namespace): ranks of two nodes with one hostname would share
        # Open MPI's shared-memory segment names (vader_segment.HOST...) and crash
        unshare --uts bash -c 'hostname "$0" && exec slurmd -D -N "$0"' "n$i" \
            >"$d/slurmd-n$i.out" 2>&1 &
        het_slurm_pids+=($!)
    done
    local t_end=$((SECONDS + 20)) # sinfo blocks up to its MessageTimeout while slurmctld is
    while [ $SECONDS -lt $t_end ]; do # busy: each call bounded, the whole wait 20 s
        [ "$(timeout -k 1 3 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -eq "$n" ] &&
            return 0
        sleep 0.1
    done
    het_slurm_why="nodes not idle within 20 s: $(sinfo -N 2>&1 | tr '\n' ' '); \
$(tail -2 "$d/slurmctld.out" "$d/slurmd-n1.out" 2>&1 | tr '\n' ' ')"
    return 1
}

het_slurm_down() {
    local p alive
    [ ${#het_slurm_pids[@]} -gt 0 ] || return 0
    # jobs first, while slurmctld can still end them
    command -v scancel >/dev/null 2>&1 && scancel --user=root >/dev/null 2>&1
    for p in "${het_slurm_pids[@]}"; do kill "$p" 2>/dev/null; done
    for _ in $(seq 50); do
        alive=0
        for p in "${het_slurm_pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive -eq 0 ] && break
        sleep 0.1
    done
    for p in "${het_slurm_pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    het_slurm_pids=()
    het_slurm_sweep
}

# SIGKILL to whatever is left of this cluster (slurmstepd, a job's processes): every process
# whose environment holds this cluster's SLURM_CONF, except this shell and its ancestors.
het_slurm_sweep() {
    local f pid keep=" " a=$BASHPID
    [ -n "$het_slurm_dir" ] || return 0
    while [ -n "$a" ] && [ "$a" -gt 1 ]; do
        keep+="$a "
        a=$(awk '{ print $4 }' "/proc/$a/stat" 2>/dev/null)
    done
    for f in /proc/[0-9]*/environ; do
        pid=${f#/proc/}
        pid=${pid%/environ}
        case $keep in *" $pid "*) continue ;; esac
        grep -qsxz "SLURM_CONF=$het_slurm_dir/slurm.conf" "$f" && kill -9 "$pid" 2>/dev/null
    done
    return 0
}

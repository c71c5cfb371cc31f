#!/usr/bin/env bash
# make test-fresh: proves that what README tells a new user to type works on a fresh Debian 12
# machine. It makes an empty Debian root (mmdebstrap --variant=minbase: essential packages, apt,
# nothing else: no make, no compiler), copies a clean clone of this repository's HEAD into it,
# and runs, as root, inside that root only, exactly the lines of README's first code block
# (the README-COMMANDS block), one after the other; any line that fails fails the check.
#
# The root sees the host's package source (its apt sources and the Acquire:: settings that source
# needs, e.g. no Valid-Until check on a frozen mirror), its /etc/hosts and /etc/resolv.conf (an
# installed Debian has them; a bootstrapped root does not), / as a mount point, /proc, /sys,
# /dev, a private /dev/shm, /run and /tmp, the network, and an environment of HOME, PATH, LANG, TERM plus the OPENBLAS_CORETYPE /
# OPENBLAS_L2_SIZE the host sets (a user on this machine has them too). Nothing else of the host:
# no installed package, no build. It runs in its own mount and PID namespaces, so mounts and
# left-over processes vanish with it; the root itself is removed afterwards (FRESH_KEEP=1 keeps it).
#
# Only the bare root is cached between runs (FRESH_CACHE, default /var/cache/hetrain-fresh; it is
# made again after FRESH_CACHE_DAYS, default 7); the packages README's commands install are
# downloaded and installed anew every time, as on a new machine.
#
# Usage: scripts/fresh_machine.sh   (as root; installs mmdebstrap on the host if missing)
# Environment: FRESH_SUITE (bookworm), FRESH_WORK (/var/tmp), FRESH_TIMEOUT (seconds for all
# the commands, 1500), FRESH_LOG (their output, kept: FRESH_WORK/hetrain-fresh.log),
# FRESH_VERBOSE=1 (that output on the terminal too), FRESH_KEEP, FRESH_CACHE, FRESH_CACHE_DAYS.
# Measured: 646 s for README's three lines on a 2-core AMD Zen 3 (2026-12-01), 50/50 tests.
set -euo pipefail

# Inside the fresh root (the clone's own copy of this script): README's lines one at a time, each
# timed; the first that fails ends the check. Their output goes to /root/fresh.log
# (FRESH_VERBOSE=1: to the terminal as well).
if [ "${1:-}" = --inside ]; then
  cd /root/hetrain
  n=0
  while IFS= read -r line <&3; do
    n=$((n + 1))
    case "$line" in ''|'#'*) continue ;; esac
    echo "test-fresh: \$ $line" | tee -a /root/fresh.log
    t0=$(date +%s)
    set +e
    if [ -n "${FRESH_VERBOSE:-}" ]; then
      bash -c "$line" </dev/null 2>&1 | tee -a /root/fresh.log
      rc=${PIPESTATUS[0]}
    else
      bash -c "$line" </dev/null >> /root/fresh.log 2>&1
      rc=$?
    fi
    set -e
    echo "test-fresh: line $n: exit $rc after $(( $(date +%s) - t0 )) s"
    [ $rc -eq 0 ] || exit $rc
  done 3< /root/readme-commands
  exit 0
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
suite=${FRESH_SUITE:-bookworm}
cache=${FRESH_CACHE:-/var/cache/hetrain-fresh}
days=${FRESH_CACHE_DAYS:-7}
limit=${FRESH_TIMEOUT:-1500}
say() { echo "test-fresh: $*"; }
die() { echo "test-fresh: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (it makes a Debian root with mmdebstrap and chroots into it)"
for t in git tar unshare chroot timeout apt-config; do
  command -v "$t" >/dev/null 2>&1 || die "'$t' not found on the host"
done
if ! command -v mmdebstrap >/dev/null 2>&1; then
  say "installing mmdebstrap on the host"
  DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null
fi

# README's commands: the first fenced block after the README-COMMANDS marker, as written there
commands=$(awk '/<!-- README-COMMANDS/ { m = 1; next }
                m == 1 && /^```/ { m = 2; next }
                m == 2 && /^```/ { exit }
                m == 2 { print }' "$repo/README.md")
[ -n "$commands" ] || die "README.md: no code block after <!-- README-COMMANDS -->"

# the host's package source, for the root's apt (and mmdebstrap's own downloads)
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -s "$f" ] && grep -qv '^[[:space:]]*\(#\|$\)' "$f" && sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || die "no apt sources on the host (/etc/apt/sources.list*)"
aptconf=$(apt-config dump | grep -E '^Acquire::(Check-Valid-Until|Check-Date|https?::|ftp::|Retries)' || true)

work=$(mktemp -d "${FRESH_WORK:-/var/tmp}/hetrain-fresh.XXXXXX")
root=$work/root
cleanup() {
  # the namespaces' mounts are gone with their last process; never delete through a mount
  if grep -q " $root/" /proc/mounts; then
    echo "test-fresh: $root still has mounts; left in place" >&2
  elif [ -z "${FRESH_KEEP:-}" ]; then
    rm -rf "$work"
  else
    say "kept $root"
  fi
}
trap cleanup EXIT

# the bare root: cached tarball, made again when older than $days days or of another source
mkdir -p "$cache"
key=$(printf '%s\n' "$suite" "$aptconf" | cat - "${sources[@]}" | md5sum | cut -c1-12)
tarball=$cache/$suite-minbase-$key.tar
if [ -z "$(find "$tarball" -mtime -"$days" 2>/dev/null)" ]; then
  say "making a bare $suite root (mmdebstrap --variant=minbase), cached as $tarball"
  printf '%s\n' "$aptconf" > "$work/aptconf"
  t0=$(date +%s)
  part=$cache/.part-$key.tar   # mmdebstrap picks the format from the name: .tar
  rm -rf "$part"
  mmdebstrap --quiet --variant=minbase --mode=root --aptopt="$work/aptconf" \
      "$suite" "$part" "${sources[@]}" > "$work/mmdebstrap.log" 2>&1 ||
    { tail -20 "$work/mmdebstrap.log" >&2; rm -rf "$part"; die "mmdebstrap failed"; }
  mv "$part" "$tarball"
  say "bare root made in $(( $(date +%s) - t0 )) s"
fi
mkdir -p "$root"
tar -C "$root" -xf "$tarball"
for t in make gcc cmake mpicc; do
  [ ! -e "$root/usr/bin/$t" ] || die "the bare root has $t already: it is not a fresh machine"
done
# what an installed machine has and a bootstrapped root lacks: its name service files (without
# /etc/hosts, Open MPI's start-up waits 5 s on every MPI_Init: measured)
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
cp /etc/hosts "$root/etc/hosts" 2>/dev/null || true

# a clean clone of HEAD, as a user gets it
git clone --quiet --no-hardlinks "$repo" "$root/root/hetrain"
say "checkout $(git -C "$root/root/hetrain" log -1 --format='%h %s' | cut -c1-72)"
printf '%s\n' "$commands" > "$root/root/readme-commands"

envs=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
      TERM=dumb)
for v in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE FRESH_VERBOSE; do
  if [ -n "${!v:-}" ]; then envs+=("$v=${!v}"); fi
done

say "running README's commands in the fresh root (limit ${limit} s)"
t0=$(date +%s)
set +e
ROOT=$root timeout --kill-after=30 "$limit" unshare --mount --pid --fork --kill-child --propagation private -- \
  bash -c 'set -e
    mount --bind "$ROOT" "$ROOT"   # / a mount point, as on a machine (ip netns exec needs it)
    mount -t proc proc "$ROOT/proc"
    mount --rbind /sys "$ROOT/sys"
    mount --rbind /dev "$ROOT/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$ROOT/dev/shm"
    mount -t tmpfs tmpfs "$ROOT/run"
    mount -t tmpfs -o mode=1777 tmpfs "$ROOT/tmp"
    exec chroot "$ROOT" /usr/bin/env -i "$@" bash /root/hetrain/scripts/fresh_machine.sh --inside
  ' sh "${envs[@]}"
rc=$?
set -e
elapsed=$(( $(date +%s) - t0 ))
log=${FRESH_LOG:-${FRESH_WORK:-/var/tmp}/hetrain-fresh.log}
cp "$root/root/fresh.log" "$log" 2>/dev/null || true
if [ $rc -eq 0 ]; then
  # what ran, from the log: the tests' summary and the demo's table rows
  grep -aE '^[0-9]+% tests passed|^\| [a-z0-9]+ \| [0-9]' "$log" | sed 's/^/test-fresh:   /' || true
  say "README's commands passed on a fresh $suite root in $elapsed s (their output: $log)"
  exit 0
fi
echo "test-fresh: the last 40 lines of their output ($log):" >&2
tail -n 40 "$log" 2>/dev/null | sed 's/^/test-fresh: | /' >&2
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  die "README's commands ran past ${limit} s on a fresh $suite root"
fi
die "README's commands failed on a fresh $suite root (exit $rc after $elapsed s)"

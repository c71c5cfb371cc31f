/* The clock of the emulation. On the wall clock the emulated slowdown and network sleep, which
 * is faithful only while every rank has a core of its own: on a 2-core host with 4 ranks the
 * contention for cores is multiplied into the slow ranks' time. The virtual clock is SimGrid's
 * online simulation (SMPI) reduced to what hetrain needs: the application really runs, each
 * compute piece is costed on the host (the CPU time of the threads that did it, or a calibrated
 * cost) and added to the rank's clock V, and every communication advances V through the
 * network cost model: it ends at (the latest participant's V when it posted) + the modeled
 * time, and a wait sets V = max(V, that end). Nothing sleeps; V is in seconds.
 *
 * One clock per process (a rank is a process), like MPI's own state; only the MPI thread
 * advances it (compute pieces are charged by that thread after the workers finished). */
#include "emul/emul.h"

static het_clock_kind kind = HET_CLOCK_WALL;
static double v_now = 0.0;

void het_clock_use(het_clock_kind k) {
    kind = k == HET_CLOCK_VIRTUAL ? HET_CLOCK_VIRTUAL : HET_CLOCK_WALL;
    v_now = 0.0;
}

int het_clock_virtual(void) { return kind == HET_CLOCK_VIRTUAL; }

double het_clock_now(void) { return kind == HET_CLOCK_VIRTUAL ? v_now : het_now(); }

void het_clock_advance(double dt) {
    if (kind == HET_CLOCK_VIRTUAL && dt > 0.0) v_now += dt;
}

void het_clock_advance_to(double t) {
    if (kind == HET_CLOCK_VIRTUAL && t > v_now) v_now = t;
}

void het_clock_rewind(double t) {
    if (kind == HET_CLOCK_VIRTUAL) v_now = t;
}

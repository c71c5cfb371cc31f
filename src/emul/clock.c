/* The clock of the emulation. On the wall clock the emulated slowdown and network sleep, which
 * is faithful only while every rank has a core of its own: on a 2-core host with 4 ranks the
 * contention for cores is multiplied into the slow ranks' time. The virtual clock is SimGrid's
 * online simulation (SMPI) reduced to what hetrain needs: the application really runs, each
 * compute piece is costed on the host (the CPU time of the threads that did it, or a calibrated
 * cost) and added to its lane's time V, and every communication advances V through the
 * network cost model: it ends at (the latest participant's V when it posted) + the modeled
 * time, and a wait sets V = max(V, that end). Nothing sleeps; V is in seconds.
 *
 * The kind of clock is one setting per process (a rank is a process), like MPI's own; the
 * time is a value per lane (emul.h: het_lane), one per thread that keeps time of its own, so
 * no thread reads or moves another's time by accident. */
#include "emul/emul.h"

static het_clock_kind kind = HET_CLOCK_WALL;

void het_clock_use(het_clock_kind k) {
    kind = k == HET_CLOCK_VIRTUAL ? HET_CLOCK_VIRTUAL : HET_CLOCK_WALL;
}

int het_clock_virtual(void) { return kind == HET_CLOCK_VIRTUAL; }

double het_lane_now(const het_lane *l) { return kind == HET_CLOCK_VIRTUAL ? l->t : het_now(); }

void het_lane_advance(het_lane *l, double dt) {
    if (kind == HET_CLOCK_VIRTUAL && dt > 0.0) l->t += dt;
}

void het_lane_advance_to(het_lane *l, double t) {
    if (kind == HET_CLOCK_VIRTUAL && t > l->t) l->t = t;
}

void het_lane_rewind(het_lane *l, double t) {
    if (kind == HET_CLOCK_VIRTUAL) l->t = t;
}

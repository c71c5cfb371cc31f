# Sourced by the command-line tests (the hetrain binary, mostly under mpirun): in a sanitized
# build (make test-asan) their processes run without the leak check at exit. The check is
# what made the sanitized suite slow: Open MPI leaves a few thousand allocations at exit, and
# matching them to tests/lsan.supp needs the full unwinder at every malloc
# (fast_unwind_on_malloc=0) and a module lookup per frame at exit, about twice a multi-rank
# run's time (a 5-rank lenet5 run 8.4 s against 4.1 s, 2026-12-05). The leak check of the
# command itself is test_leaks_mpi: every strategy, checkpoints, resume, evaluation and bf16
# under mpirun with the check on; the C tests (tests/*.c, also those under mpirun) keep it.
# Address and undefined-behaviour checks stay on here. Later options win, hence appended.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:fast_unwind_on_malloc=1"

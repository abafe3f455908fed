#!/bin/bash
# mpirun with a session directory of its own. Open MPI 4 keeps every job's
# session files under one directory per user and node, and a job that ends
# may remove that directory while another job (ctest runs lit's multi-rank
# tests beside their ThreadSanitizer twins) is creating its own in it; the
# second then fails with "orte_session_dir failed". A private base
# directory per job removes the race. Arguments are mpirun's; SIGTERM,
# SIGINT and SIGHUP are passed on to mpirun, which passes them to the ranks.
set -u
base=$(mktemp -d "${TMPDIR:-/tmp}/braid-mpi.XXXXXX") || exit 1
mpirun --mca orte_tmpdir_base "$base" "$@" <&0 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM
trap 'kill -INT "$pid" 2>/dev/null' INT
trap 'kill -HUP "$pid" 2>/dev/null' HUP
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
wait "$pid"
status=$?
rm -rf "$base"
exit "$status"

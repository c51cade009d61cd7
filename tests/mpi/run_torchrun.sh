#!/usr/bin/env bash
# Runs a program on NP ranks of this host under torchrun (torch.distributed.run), as PyTorch
# users start jobs, under a hard time limit:
#   run_torchrun.sh PYTHON NP SECONDS [--no_python] PROGRAM [ARGS...]
# --standalone: torchrun's own rendezvous on a free port, so tests run side by side. Torch
# 1.13's torchrun reads its default --redirects 0 as no setting at all under Python 3.11 (its
# enum of streams no longer yields the zero member when iterated) and fails before it starts
# a worker; --redirects 1 --tee 1 (each worker's stdout into a log file and to the console)
# starts them, and keeps their output where the test reads it. The log files go in a folder
# of this run's, removed at the end.
set -u
python=$1
np=$2
limit=$3
shift 3
logs=$(mktemp -d "${TMPDIR:-/tmp}/chorus-torchrun.XXXXXX")
trap 'rm -rf "$logs"' EXIT
timeout -k 10 "$limit" "$python" -m torch.distributed.run --standalone --nproc_per_node "$np" \
  --redirects 1 --tee 1 --log_dir "$logs" "$@"

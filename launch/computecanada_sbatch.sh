#!/bin/bash
# Chorus on a Slurm cluster that wants a fresh virtualenv in every job (Compute Canada's
# way): each node makes one on its local disk, installs torch and chorus from wheels without
# an index, and `srun python` runs one rank per task. Submit from the directory where the
# output should go:
#
#   sbatch launch/computecanada_sbatch.sh train.py --epochs 2
#   sbatch -N 4 --ntasks-per-node=4 launch/computecanada_sbatch.sh train.py
#
# train.py is a script written for horovod.torch with `import chorus.torch as hvd`.
# The chorus wheel comes from CHORUS_WHEELHOUSE (default ~/wheels), built once on a login
# node, in a venv with the torch your jobs install (docs/install.md):
#   pip wheel --no-build-isolation --no-deps -w ~/wheels ~/chorus/bindings/python
#
# The lines starting with #SBATCH are options for sbatch (the command line wins over them):
#SBATCH --job-name=chorus-venv
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --time=00:30:00
#SBATCH --output=chorus-%j.out
# Add your account, and for GPU nodes one GPU per task:
##SBATCH --account=def-someuser
##SBATCH --gpus-per-task=1
set -euo pipefail

# 1. Software: Python (and CUDA for GPUs), the versions the wheels were built with. Module
#    scripts read variables that may be unset, so load them with -u off.
# set +u; module load python/3.11 cuda; set -u

# 2. The script and its arguments: what was given to sbatch after this file.
if [ $# -eq 0 ]; then
  echo "usage: sbatch computecanada_sbatch.sh TRAIN.py [ARGS...]" >&2
  exit 2
fi

# 3. One virtualenv per node, on its local disk ($SLURM_TMPDIR where the site sets it).
#    CHORUS_VENV_OPTIONS adds options, e.g. --system-site-packages to use a torch that the
#    site's Python already has; torch is installed only when the venv cannot import it.
wheelhouse=${CHORUS_WHEELHOUSE:-$HOME/wheels}
env_dir=${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/chorus-env-$SLURM_JOB_ID
export CHORUS_ENV_DIR=$env_dir CHORUS_WHEELHOUSE=$wheelhouse
srun --ntasks="$SLURM_NNODES" --ntasks-per-node=1 bash -c '
  set -euo pipefail
  env_dir=$CHORUS_ENV_DIR-$(hostname -s)
  if command -v virtualenv >/dev/null; then
    virtualenv --no-download ${CHORUS_VENV_OPTIONS:-} "$env_dir" >/dev/null
  else
    python3 -m venv ${CHORUS_VENV_OPTIONS:-} "$env_dir"
  fi
  source "$env_dir/bin/activate"
  python -c "import torch" 2>/dev/null || pip install --no-index --quiet torch
  pip install --no-index --no-deps --quiet --find-links "$CHORUS_WHEELHOUSE" chorus
  echo "$(hostname -s): $(python -c "import chorus, torch; print(\"chorus\", chorus.__version__, \"torch\", torch.__version__)")"
'

# 4. Chorus settings reach every rank (srun passes the environment); CHORUS_LOG_LEVEL=info
#    prints the host -> ranks table from rank 0.
export CHORUS_LOG_LEVEL=${CHORUS_LOG_LEVEL:-info}

# 5. One rank per task, each in its node's venv. srun's --mpi: pmix where this Slurm has it,
#    else pmi2 (CHORUS_SRUN_MPI chooses).
mpi=${CHORUS_SRUN_MPI:-}
if [ -z "$mpi" ]; then
  plugins=$(srun --mpi=list 2>&1 || true)
  if grep -qw 'pmix' <<<"$plugins"; then mpi=pmix; elif grep -qw 'pmi2' <<<"$plugins"; then mpi=pmi2; fi
fi
echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: $SLURM_NTASKS ranks${mpi:+, srun --mpi=$mpi}"
srun ${mpi:+--mpi=$mpi} bash -c 'source "$CHORUS_ENV_DIR-$(hostname -s)/bin/activate" && exec python "$@"' \
  python "$@"

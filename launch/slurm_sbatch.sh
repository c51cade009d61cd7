#!/bin/bash
# Chorus on a Slurm cluster: data-parallel training with a C++ or LibTorch trainer (or any
# program) on 2 nodes x 4 ranks. Submit from the directory where the output should go:
#
#   sbatch launch/slurm_sbatch.sh ./my_trainer --lr 0.1          # 2 nodes x 4 ranks
#   sbatch -N 4 --ntasks-per-node=2 launch/slurm_sbatch.sh ./my_trainer   # another layout
#   sbatch launch/slurm_sbatch.sh ~/chorus/build/examples/mnist --epochs 2   # a source build's LibTorch example
#
# Watch it with `squeue -u $USER`, stop it with `scancel JOBID`; everything the ranks
# print lands in chorus-JOBID.out (stdout and stderr together).
#
# The lines starting with #SBATCH are options for sbatch (the command line wins over them):
#SBATCH --job-name=chorus-fmnist
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --time=00:30:00
#SBATCH --output=chorus-%j.out
# Add the partition and account your site requires, e.g.:
##SBATCH --partition=gpu
##SBATCH --account=myproject
# For GPU nodes, one GPU per rank:
##SBATCH --gres=gpu:4
set -euo pipefail

# 1. Software: the chorus module (which loads what Chorus was built with) or, without
#    modules, chorusrun on PATH. Module scripts read variables that may be unset, so load
#    them with -u off.
# set +u; module load chorus; set -u

# 2. The program: the arguments given after the script.
if [ $# -eq 0 ]; then
  echo "usage: sbatch slurm_sbatch.sh PROGRAM [ARGS...]" >&2
  exit 2
fi
program=("$@")

# 3. Chorus settings reach every rank (srun passes the environment); CHORUS_LOG_LEVEL=info
#    prints the host -> ranks table from rank 0, so the output shows where each rank ran.
export CHORUS_LOG_LEVEL=${CHORUS_LOG_LEVEL:-info}

# 4. Launch. Inside the job chorusrun reads the allocation (SLURM_NTASKS_PER_NODE and the
#    node list) and runs srun with one rank per task, ppr:K:node, which is what Chorus's
#    local ranks assume for GPU selection; srun's --mpi is pmix where this Slurm has it, else
#    pmi2 (CHORUS_SRUN_MPI=<plugin> chooses). --explain prints which rank runs where first;
#    --launcher mpirun runs the same layout with mpirun instead.
echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: $SLURM_NTASKS ranks"
echo "running: ${program[*]}"
chorusrun --explain "${program[@]}"

#!/bin/bash
# Chorus on a Slurm cluster: data-parallel training of the Fashion-MNIST example on
# 2 nodes x 4 ranks. Submit from the directory where the output should go:
#
#   sbatch launch/slurm_sbatch.sh                       # the example, 2 epochs
#   sbatch -N 4 --ntasks-per-node=2 launch/slurm_sbatch.sh   # another layout, same script
#   sbatch launch/slurm_sbatch.sh ./my_trainer --lr 0.1 # your own program and arguments
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

# 1. Software. Load the same compiler and MPI that Chorus was built with; module names
#    differ per site (`module avail openmpi` lists them). Without modules, skip this.
#    Module scripts read variables that may be unset, so load them with -u off.
# set +u; module load gcc openmpi hwloc; set -u

# 2. The program: the arguments given to sbatch after the script, else the Fashion-MNIST
#    example. CHORUS_EXAMPLE points at its binary: examples/fashion_mnist_mlp (plain C++,
#    always built) or examples/mnist (the LibTorch CNN, built when LibTorch is found; it
#    takes the same --epochs flag).
if [ $# -gt 0 ]; then
  program=("$@")
else
  program=("${CHORUS_EXAMPLE:-$HOME/chorus/build/examples/fashion_mnist_mlp}" --epochs 2)
fi

# 3. Chorus settings travel to every rank; CHORUS_LOG_LEVEL=info prints the host -> ranks
#    table from rank 0, so the output shows where each rank ran.
export CHORUS_LOG_LEVEL=${CHORUS_LOG_LEVEL:-info}
forward=()
for var in $(compgen -e | grep -E '^(CHORUS|NCCL)_' || true); do forward+=(-x "$var"); done

# 4. Launch. Slurm sets SLURM_NTASKS and SLURM_NTASKS_PER_NODE from the options above;
#    ppr:K:node puts K consecutive ranks on each node, which is what Chorus's local ranks
#    assume for GPU selection. --bind-to none leaves CPU binding to CHORUS_BIND (off by
#    default). The alternative without mpirun is Slurm's own launcher:
#      srun --mpi=pmix "${program[@]}"
#    or `chorusrun --explain "${program[@]}"`, which reads this allocation and prints
#    which rank runs where before starting.
ppr=${SLURM_NTASKS_PER_NODE:-4}
ppr=${ppr%%(*}  # a plain count; "4(x2)" is SLURM_TASKS_PER_NODE's form, stripped just in case
echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: $SLURM_NTASKS ranks, $ppr per node"
echo "running: ${program[*]}"
mpirun -np "$SLURM_NTASKS" -map-by "ppr:${ppr}:node" --bind-to none "${forward[@]}" \
  "${program[@]}"

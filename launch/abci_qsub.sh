#!/bin/bash
# Chorus on ABCI (Grid Engine): data-parallel training of the Fashion-MNIST example on
# 2 full nodes x 4 ranks (one rank per GPU). Submit from the directory where the output
# should go, with your ABCI group:
#
#   qsub -g GROUP launch/abci_qsub.sh                      # the example, 2 epochs
#   qsub -g GROUP launch/abci_qsub.sh ./my_trainer --lr 0.1   # your own program
#
# `qstat` shows the job, `qdel JOBID` stops it. Output (stdout and stderr together, -j y)
# lands in abci_qsub.sh.oJOBID in the submission directory (-cwd).
#
# Lines starting with #$ are options for qsub:
#$ -l rt_F=2
#$ -l h_rt=0:30:00
#$ -j y
#$ -cwd
# 1. Software. Load the same compiler, MPI (and CUDA/NCCL for GPUs) that Chorus was built
#    with; `module avail` lists the versions installed. This comes before `set -u`: the
#    module scripts read variables that may be unset, and under -u that ends the job.
source /etc/profile.d/modules.sh
# module load gcc openmpi hwloc cuda nccl
set -euo pipefail

# 2. The program: the arguments given to qsub after the script, else the Fashion-MNIST
#    example. CHORUS_EXAMPLE points at its binary: examples/fashion_mnist_mlp (plain C++)
#    or examples/mnist (the LibTorch CNN, when LibTorch was found at build time).
if [ $# -gt 0 ]; then
  program=("$@")
else
  program=("${CHORUS_EXAMPLE:-$HOME/chorus/build/examples/fashion_mnist_mlp}" --epochs 2)
fi

# 3. Layout: NHOSTS is the number of nodes Grid Engine gave the job (rt_F=2 -> 2);
#    RANKS_PER_NODE ranks go to each, 4 = the GPUs of an rt_F node.
RANKS_PER_NODE=${RANKS_PER_NODE:-4}
NP=$((NHOSTS * RANKS_PER_NODE))

# 4. Chorus settings travel to every rank with -x; CHORUS_LOG_LEVEL=info prints the host ->
#    ranks table from rank 0.
export CHORUS_LOG_LEVEL=${CHORUS_LOG_LEVEL:-info}
forward=()
for var in $(compgen -e | grep -E '^(CHORUS|NCCL)_' || true); do forward+=(-x "$var"); done

# 5. Launch: hosts from the job's host list, RANKS_PER_NODE consecutive ranks per node,
#    the ob1 messaging layer as ABCI recommends for Open MPI. CPU binding is left to
#    CHORUS_BIND (off by default). `chorusrun --explain --ppr 4 "${program[@]}"` builds
#    the same command from $PE_HOSTFILE and prints which rank runs where first.
echo "job $JOB_ID: $NP ranks on $NHOSTS nodes, $RANKS_PER_NODE per node"
echo "running: ${program[*]}"
mpirun -np "$NP" -hostfile "$SGE_JOB_HOSTLIST" -map-by "ppr:${RANKS_PER_NODE}:node" \
  -mca pml ob1 --bind-to none "${forward[@]}" "${program[@]}"

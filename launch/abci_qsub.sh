#!/bin/bash
# Chorus on ABCI (Grid Engine): data-parallel training on 2 full nodes x 4 ranks (one rank
# per GPU). Submit from the directory where the output should go, with your ABCI group:
#
#   qsub -g GROUP launch/abci_qsub.sh python3 train.py --epochs 2   # a horovod.torch script
#   qsub -g GROUP launch/abci_qsub.sh ./my_trainer --lr 0.1         # a C++ trainer
#
# train.py is a script written for horovod.torch with `import chorus.torch as hvd`.
# `qstat` shows the job, `qdel JOBID` stops it. Output (stdout and stderr together, -j y)
# lands in abci_qsub.sh.oJOBID in the submission directory (-cwd).
#
# Lines starting with #$ are options for qsub:
#$ -l rt_F=2
#$ -l h_rt=0:30:00
#$ -j y
#$ -cwd
# 1. Software: the modules Chorus was built with and the venv that has torch and chorus
#    (docs/install.md). `module avail` lists the versions. This comes before `set -u`: the
#    module scripts read variables that may be unset, and under -u that ends the job.
[ -f /etc/profile.d/modules.sh ] && source /etc/profile.d/modules.sh
# module load gcc/12 openmpi cuda nccl python/3.11
# source ~/venv/chorus/bin/activate          # pip install of chorus (chorusrun comes with it)
# module load chorus                         # or a site install of Chorus
set -euo pipefail

# 2. The program: the arguments given after the script.
if [ $# -eq 0 ]; then
  echo "usage: qsub -g GROUP abci_qsub.sh PROGRAM [ARGS...]" >&2
  exit 2
fi
program=("$@")

# 3. Layout: RANKS_PER_NODE ranks on each node of the job ($PE_HOSTFILE, which chorusrun
#    reads), 4 = the GPUs of an rt_F node. CHORUS_BIND (default core) gives each rank and
#    its background thread cores of their own near its GPU; chorusrun turns mpirun's own
#    binding off.
RANKS_PER_NODE=${RANKS_PER_NODE:-4}
export CHORUS_BIND=${CHORUS_BIND:-core}

# 4. Chorus settings reach every rank (chorusrun passes the environment to mpirun's ranks);
#    CHORUS_LOG_LEVEL=info prints the host -> ranks table from rank 0.
export CHORUS_LOG_LEVEL=${CHORUS_LOG_LEVEL:-info}

# 5. Launch, with the ob1 messaging layer that ABCI recommends for Open MPI. --explain
#    prints which rank runs where, on which cores and GPU, before starting.
echo "job $JOB_ID: $NHOSTS nodes, $RANKS_PER_NODE ranks per node"
echo "running: ${program[*]}"
chorusrun --ppr "$RANKS_PER_NODE" --mpi-args "-mca pml ob1" --explain "${program[@]}"

"""Elastic training for scripts written for ``horovod.torch.elastic``: ``run``,
``TorchState``, ``ElasticSampler``, ``State``, ``ObjectState``. Launch the script with
``chorusrun --gloo --max-restarts N`` (docs/elastic.md): a job that loses a rank or a host
resets its workers in place, on the hosts left, from the newest commit; hosts that the
discovery script adds join at the next commit. On MPI (``chorusrun --max-restarts N``) the
job is relaunched instead and resumes from the newest commit a node stored."""

from chorus._loader import ext as _ext
from chorus.common.elastic import ObjectState, State, run_fn
from chorus.torch.elastic.sampler import ElasticSampler
from chorus.torch.elastic.state import TorchState
from chorus.torch.mpi_ops import barrier, shutdown
from chorus.torch.runtime import elastic_reset


def start_number():
    """Which start of the elastic job this rank runs in, from 1: the launch of a job that is
    relaunched, or the round of one that resets in place; 0 outside a job chorusrun
    supervises. A Chorus addition."""
    return _ext.elastic_start_number()


def run(func):
    """Decorates the training function ``func(state, ...)``: it starts from the newest
    commit of the job (after the reset callbacks and a sync from rank 0); a failed collective
    or added hosts reset the workers in place (chorusrun --gloo), or end them for the
    supervisor to relaunch (on MPI)."""
    return run_fn(func, shutdown, barrier, elastic_reset)


__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run", "start_number"]

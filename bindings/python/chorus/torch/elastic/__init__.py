"""Elastic training for scripts written for ``horovod.torch.elastic``: ``run``,
``TorchState``, ``ElasticSampler``, ``State``, ``ObjectState``. Launch the script with
``chorusrun --max-restarts N`` (docs/elastic.md): a job that loses a rank or a host is
relaunched on the hosts left and resumes from the newest commit a node holds; hosts that
the discovery script adds join at the next commit."""

from chorus.common.elastic import ObjectState, State, run_fn
from chorus.torch.elastic.sampler import ElasticSampler
from chorus.torch.elastic.state import TorchState
from chorus.torch.mpi_ops import barrier, shutdown


def run(func):
    """Decorates the training function ``func(state, ...)``: it starts from the newest
    commit of the job (after the reset callbacks and a sync from rank 0), and a worker that
    meets added hosts at a commit stops so that the supervisor relaunches the job on them."""
    return run_fn(func, shutdown, barrier)


__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run"]

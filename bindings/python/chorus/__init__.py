"""Chorus: collective communication for data-parallel training.

Use ``import chorus.torch as hvd`` in a script written for ``horovod.torch``.
"""

__version__ = "0.1.0"

"""Chorus: collective communication for data-parallel training.

Use ``import chorus.torch as hvd`` in a script written for ``horovod.torch``.
"""

from chorus._build_info import CHORUS_VERSION as __version__  # noqa: F401

"""ShardedOptimizer: sharded data parallelism for ``torch.optim`` optimizers.

The wrapper derives from the wrapped optimizer's class, as DistributedOptimizer does, but
its parameter groups hold this rank's shards: flat tensors that share the model's parameter
storage, 1/P of every gradient bucket. The C++ ShardedReducer of Chorus::torch lays the
parameters out in the buckets, hooks their gradient accumulation and reduces each bucket
during backward (allreduce at stage 1, reduce-scatter at stage 2); step() runs the wrapped
optimizer on the shards and allgathers them into every rank's parameters.

Checkpoints: ``state_dict()`` is this rank's shard (restore it at the same number of ranks);
``consolidated_state_dict()`` (collective) is the whole state by parameter name, which
``load_state_dict`` reshards onto any number of ranks.
"""

import collections
import itertools

import torch

from chorus._loader import ext as _ext
from chorus.torch import mpi_ops
from chorus.torch.compression import Compression
from chorus.torch.mpi_ops import Average, global_process_set
from chorus.torch.optimizer import _checked_reduction, _named_pairs

_optimizer_ids = collections.defaultdict(itertools.count)
_FORMAT = "chorus.sharded.v1"


class ShardedOptimizerBase:
    """What every ShardedOptimizer is an instance of (the elastic state finds them by it)."""


def _is_shard_value(value, shard):
    return torch.is_tensor(value) and value.numel() == shard.numel() and value.dim() > 0


class _ShardedOptimizer(torch.optim.Optimizer):
    def __init__(self, optimizer, named_parameters, stage, bucket_cap_mb, compression,
                 backward_passes_per_step, op, gradient_predivide_factor, process_set):
        if optimizer.state:
            raise ValueError("ShardedOptimizer: the optimizer has state already; wrap it "
                             "before its first step (and restore checkpoints through the "
                             "wrapper)")
        if stage not in (1, 2):
            raise ValueError(f"ShardedOptimizer: stage is 1 or 2, got {stage} (stage 0 is "
                             "DistributedOptimizer(bucket_cap_mb=...))")
        if process_set.included() is False:
            raise ValueError("ShardedOptimizer: this rank is not in the process set")
        pairs = _named_pairs(optimizer.param_groups, named_parameters)
        group_index = {}
        for g, group in enumerate(optimizer.param_groups):
            for p in group["params"]:
                group_index[id(p)] = g
        code = _checked_reduction(op, gradient_predivide_factor, compression,
                                  backward_passes_per_step, "ShardedOptimizer")
        set_id = mpi_ops._set_id(process_set)
        prefix = f"shard.set{set_id}.{next(_optimizer_ids[set_id])}."
        self._names = [n for n, _ in pairs]
        self._engine = _ext.ShardedReducer(
            pairs, [group_index[id(p)] for _, p in pairs], stage=int(stage),
            bucket_bytes=int(bucket_cap_mb * 2**20), op=op,
            gradient_predivide_factor=float(gradient_predivide_factor),
            backward_passes_per_step=int(backward_passes_per_step), compression=code,
            process_set=set_id, name_prefix=prefix)
        self._shards = self._engine.shards()
        groups = [{k: v for k, v in group.items() if k != "params"}
                  for group in optimizer.param_groups]
        for group in groups:
            group["params"] = []
        for b, shard in enumerate(self._shards):
            groups[self._engine.group_of_bucket(b)]["params"].append(shard)
        # Each group's parameters by name in the wrapped optimizer's order (the consolidated
        # state lists them so), and which of the wrapped groups each of ours is.
        name_of = {id(p): n for n, p in pairs}
        self._group_names = [[name_of[id(p)] for p in g["params"]]
                             for g in optimizer.param_groups]
        self._wrapped_group = [g for g, group in enumerate(groups) if group["params"]]
        super(self.__class__, self).__init__([g for g in groups if g["params"]])
        self.stage = stage
        self.process_set = process_set
        self.backward_passes_per_step = backward_passes_per_step
        self._synchronized = False

    def synchronize(self):
        """Waits until every bucket is reduced; then each shard's ``.grad`` holds this rank's
        part of the reduced gradient (clip it with clip_grad_norm)."""
        self._engine.synchronize()
        self._synchronized = True

    def step(self, closure=None):
        if not self._synchronized:
            self.synchronize()
        self._synchronized = False
        result = super(self.__class__, self).step(closure)
        self._engine.gather_parameters()
        _ext.mark_step()
        return result

    def zero_grad(self, set_to_none=None):
        """Stage 1 zeroes the gradient buckets in place; stage 2 releases the gradients."""
        self._engine.zero_grad()

    def clip_grad_norm(self, max_norm, norm_type=2.0):
        """Scales the gradient so that its norm over every rank's shards is at most
        ``max_norm``; returns the norm before scaling, as torch.nn.utils.clip_grad_norm_.
        Collective; synchronizes first where needed."""
        if not self._synchronized:
            self.synchronize()
        return self._engine.clip_grad_norm(float(max_norm), float(norm_type))

    def gradient_bytes(self):
        """Bytes this rank holds for gradients between steps."""
        return self._engine.gradient_bytes()

    def state_dict(self):
        out = super(self.__class__, self).state_dict()
        out["chorus_shard"] = {"rank": self.process_set.rank(),
                               "count": self._engine.shard_count()}
        return out

    def consolidated_state_dict(self):
        """The whole optimizer state, by parameter name, on every rank: each shard's
        element-wise state (momentum, moments) gathered over the set and cut per parameter,
        other values (step counts) kept per parameter. Collective."""
        shard_states = [self.state.get(shard, {}) for shard in self._shards]
        keys = sorted({k for st in shard_states for k in st})
        per_name = {n: {} for n in self._names}
        for key in keys:
            values = [st.get(key) for st in shard_states]
            if all(v is None or _is_shard_value(v, s) for v, s in zip(values, self._shards)):
                empty = torch.empty(0)
                whole = self._engine.gather_to_parameters(
                    [v if v is not None else empty for v in values])
                for name, value in zip(self._names, whole):
                    if value is not None:
                        per_name[name][key] = value
                continue
            for b, value in enumerate(values):
                if value is None:
                    continue
                for name in self._bucket_names(b):
                    per_name[name][key] = value.clone() if torch.is_tensor(value) else value
        groups = [{"params": list(names)} for names in self._group_names]
        for g, group in zip(self._wrapped_group, self.param_groups):
            groups[g].update({k: v for k, v in group.items() if k != "params"})
        return {"format": _FORMAT, "state": {n: st for n, st in per_name.items() if st},
                "param_groups": groups}

    def load_state_dict(self, state_dict):
        if state_dict.get("format") == _FORMAT:
            self._load_consolidated(state_dict)
            return
        shard = state_dict.get("chorus_shard")
        if shard is None:
            raise ValueError("ShardedOptimizer.load_state_dict: neither a shard's state_dict() "
                             "nor a consolidated_state_dict()")
        if (shard["rank"], shard["count"]) != (self.process_set.rank(),
                                               self._engine.shard_count()):
            raise ValueError(f"ShardedOptimizer.load_state_dict: the state of shard "
                             f"{shard['rank']} of {shard['count']} given to shard "
                             f"{self.process_set.rank()} of {self._engine.shard_count()}; "
                             "restore a consolidated_state_dict() on another number of ranks")
        state_dict = {k: v for k, v in state_dict.items() if k != "chorus_shard"}
        super(self.__class__, self).load_state_dict(state_dict)

    def _load_consolidated(self, state_dict):
        saved = state_dict["state"]
        keys = sorted({k for st in saved.values() for k in st})
        self.state.clear()
        for key in keys:
            values = [saved.get(n, {}).get(key) for n in self._names]
            if all(v is None or (torch.is_tensor(v) and v.dim() > 0) for v in values):
                empty = torch.empty(0)
                shards = self._engine.shard_from_parameters(
                    [v if v is not None else empty for v in values])
                for s, value in zip(self._shards, shards):
                    if value is not None:
                        self.state[s][key] = value.to(s.device)
                continue
            for b, s in enumerate(self._shards):
                names = [n for n in self._bucket_names(b) if key in saved.get(n, {})]
                if names:
                    value = saved[names[0]][key]
                    self.state[s][key] = value.clone() if torch.is_tensor(value) else value
        saved_groups = state_dict["param_groups"]
        if [g["params"] for g in saved_groups] != self._group_names:
            raise ValueError("ShardedOptimizer.load_state_dict: the consolidated state's "
                             "parameter groups name other parameters than this optimizer's")
        for g, group in zip(self._wrapped_group, self.param_groups):
            group.update({k: v for k, v in saved_groups[g].items() if k != "params"})

    def _bucket_names(self, b):
        return [self._names[i] for i, _, _ in self._engine.slots(b)]


def ShardedOptimizer(optimizer, named_parameters=None, stage=2, bucket_cap_mb=25,
                     compression=Compression.none, backward_passes_per_step=1, op=Average,
                     gradient_predivide_factor=1.0, process_set=global_process_set):
    """Wraps ``optimizer`` (not stepped yet) so that each rank of ``process_set`` keeps 1/P
    of its state (stage 1), and of the reduced gradients too (stage 2), and updates only
    that part; step() then allgathers the parameters. With an element-wise optimizer (SGD,
    Adam, AdamW) the weights are DistributedOptimizer's bit for bit. Collective.

    named_parameters: (name, parameter) pairs, e.g. ``model.named_parameters()``; they name
        the reductions and the consolidated checkpoint's entries. bucket_cap_mb: the size of
        the buckets that gradients are reduced in (each rank owns 1/P of every bucket).
        compression, backward_passes_per_step, op, gradient_predivide_factor: as
        DistributedOptimizer's. At stage 2 the gradients are kept whole over the backward
        passes of one step and reduced on the last.
    """
    bases = (optimizer.__class__, ShardedOptimizerBase)
    cls = type(optimizer.__class__.__name__, bases, dict(_ShardedOptimizer.__dict__))
    return cls(optimizer, named_parameters, stage, bucket_cap_mb, compression,
               backward_passes_per_step, op, gradient_predivide_factor, process_set)


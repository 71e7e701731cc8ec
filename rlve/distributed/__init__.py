"""Training on several processes: torchrun's ranks, FSDP2 sharding, and the split of a batch.

`python -m rlve.train` under `torchrun --nproc-per-node N` runs one trainer per rank with its
parameters sharded by FSDP2 (`torch.distributed.fsdp.fully_shard`). Rank 0 alone drives rollouts,
the problem sampler, the curriculum, the inference engine and logging; it tells the other ranks
what to do next (`Crew`), so every rank takes the same steps.

Imports torch and nothing of rlve's (the trainer imports it, and `Crew` drives any object with
the trainer's methods), so `rlve.training` and `rlve.loop` can both build on it.
"""

from rlve.distributed.balance import split_by_tokens
from rlve.distributed.crew import Crew, follow
from rlve.distributed.world import World, init_world

__all__ = ["Crew", "World", "follow", "init_world", "split_by_tokens"]

"""placeholder"""

from __future__ import annotations
from ._group import ProcessGroup


class RayGroup(ProcessGroup):
    pass


async def ray_groups(world_size: int, **ray_options: object) -> list[RayGroup]:
    raise NotImplementedError

"""The runtime: the sync and async drivers, reentrancy, ``ae.Engine``, kernel offload.

It drives the core's GraphTask (aengine.core) on an event loop through anyio,
or on the calling thread.  See docs/architecture.md.
"""

from ._drivers import drive_sync as drive_sync
from ._drivers import run_detached as run_detached
from ._engine import Engine as Engine
from ._engine import EngineStats as EngineStats
from ._engine import current_engine as current_engine
from ._loop import async_library as async_library
from ._loop import loop_here as loop_here
from ._loop import loop_running as loop_running
from ._reentrant import drive_async_entry as drive_async_entry
from ._reentrant import drive_sync_entry as drive_sync_entry
from ._settings import time_slice as time_slice

"""``ae.profile()``: what the engine did, as a Chrome/Perfetto trace and a table.

``_recorder.py`` records (the Recorder the engine reports to through
aengine/core/_trace.py), ``_events.py`` turns a recording into Trace Event
dicts, ``_table.py`` into a table, ``_profile.py`` is the public object.
"""

from __future__ import annotations

from ._profile import profile
from ._recorder import Progress

__all__ = ["profile", "Progress"]

"""aengine.core."""

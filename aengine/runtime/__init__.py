"""aengine.runtime."""

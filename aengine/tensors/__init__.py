"""aengine.tensors."""

"""Tensors: the Tensor class, creation, devices, dtypes, views and in-place bookkeeping."""

from ._creation import Generator as Generator
from ._creation import arange as arange
from ._creation import as_tensor as as_tensor
from ._creation import default_generator as default_generator
from ._creation import empty as empty
from ._creation import empty_like as empty_like
from ._creation import eye as eye
from ._creation import full as full
from ._creation import full_like as full_like
from ._creation import linspace as linspace
from ._creation import manual_seed as manual_seed
from ._creation import ones as ones
from ._creation import ones_like as ones_like
from ._creation import rand as rand
from ._creation import rand_like as rand_like
from ._creation import randn as randn
from ._creation import randn_like as randn_like
from ._creation import tensor as tensor
from ._creation import zeros as zeros
from ._creation import zeros_like as zeros_like
from ._device import CPU as CPU
from ._device import Device as Device
from ._device import device as device
from ._tensor import Tensor as Tensor
from ._tensor_ops import TENSOR_OPS as TENSOR_OPS

"""The core of the engine: the graph, GraphTask and its transitions, node execution.

It imports no async library, no Tensor and no operator: the runtime drives a
GraphTask through ``GraphTask.run`` and reaches back through the
``Scheduler`` Protocol; the tensor layer hands in the Tensor class
(``bind_tensor_type``).  See docs/architecture.md.
"""

from ._anomaly import check_nan as check_nan
from ._anomaly import record_forward as record_forward
from ._anomaly import report_error as report_error
from ._commit import commit as commit
from ._errors import ERR_BACKWARD_TWICE as ERR_BACKWARD_TWICE
from ._errors import AutogradError as AutogradError
from ._errors import BackwardError as BackwardError
from ._errors import GradcheckError as GradcheckError
from ._exec_info import compute_dependencies as compute_dependencies
from ._exec_info import init_to_execute as init_to_execute
from ._graph import ZERO_VC as ZERO_VC
from ._graph import AccumulateGrad as AccumulateGrad
from ._graph import GraphRoot as GraphRoot
from ._graph import Node as Node
from ._graph import RemovableHandle as RemovableHandle
from ._graph import SavedTensor as SavedTensor
from ._graph import TensorBase as TensorBase
from ._graph import bind_tensor_type as bind_tensor_type
from ._graph import describe as describe
from ._graph import gradient_edge as gradient_edge
from ._graph import own_vc as own_vc
from ._graph import to_raw as to_raw
from ._graph import to_tensor as to_tensor
from ._graph_task import YIELD as YIELD
from ._graph_task import GraphTask as GraphTask
from ._graph_task import ReadyQueue as ReadyQueue
from ._graph_task import Scheduler as Scheduler
from ._graph_task import current_graph_task as current_graph_task
from ._graph_task import running_node as running_node
from ._graph_task import wrap_node_error as wrap_node_error
from ._modes import detect_anomaly as detect_anomaly
from ._modes import enable_grad as enable_grad
from ._modes import inference_mode as inference_mode
from ._modes import is_anomaly_check_nan_enabled as is_anomaly_check_nan_enabled
from ._modes import is_anomaly_enabled as is_anomaly_enabled
from ._modes import is_grad_enabled as is_grad_enabled
from ._modes import is_inference_mode_enabled as is_inference_mode_enabled
from ._modes import is_multithreading_enabled as is_multithreading_enabled
from ._modes import no_grad as no_grad
from ._modes import set_detect_anomaly as set_detect_anomaly
from ._modes import set_grad_enabled as set_grad_enabled
from ._modes import set_multithreading_enabled as set_multithreading_enabled
from ._node_hooks import await_user as await_user

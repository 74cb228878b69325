"""Where the partial-result names were first defined; kept so old imports keep working.

The records and their prompt live in ``_partial_result.py``, the collector in
``_partial_collector.py``. Modules still importing from here (the adapter's,
being split) can move to those at their own pace.
"""

from ._partial_collector import BASH_ABORT_MARKER, PartialCollector
from ._partial_result import PartialResult, SessionPartial, ToolCallResult

__all__ = [
    "BASH_ABORT_MARKER",
    "PartialCollector",
    "PartialResult",
    "SessionPartial",
    "ToolCallResult",
]

"""The C scan of event texts (``_scan.c``, compiled at install as ``launchgap.loaders.kineto._scan``).

:data:`_SCAN` is its ``scan`` function, or None where the extension is missing, was built from an older
source, or is turned off (``LAUNCHGAP_NATIVE_SCAN=0``): then msgspec reads every text, with the same
result. :data:`_SCAN_EVENT` is the numpy layout of one scanned record. Other modules call it as
``scan._SCAN`` (an attribute of this module), so a test can turn it off in one place.
"""

from __future__ import annotations

import os

import numpy as np

from ...trace import LAUNCH_CONFIG_COLUMNS


try:  # the fast path (_scan.c), where it was compiled at install
    from . import _scan as _native
except ImportError:  # pragma: no cover - a platform without a C compiler: msgspec reads every text
    _native = None

#: Fields of the scan's records this module reads; a build from an older source lacks some of them and
#: is not used (msgspec reads every text, with the same result) until the package is installed again.
_SCAN_FIELDS_NEEDED = frozenset(("ts", "dur", "pid", "tid", "corr", "device", "stream", "graph_id", "id", "ph", "cat",
                                 "name", "kernel", "dims", "pid_str", "tid_str", *LAUNCH_CONFIG_COLUMNS, "id_kind",
                                 "has_stack"))

if _native is not None and (not _SCAN_FIELDS_NEEDED <= {f[0] for f in _native.EVENT_FIELDS}
                            or not hasattr(_native, "KERNEL_RESOURCES")):  # it returns the kernels' resources too
    _native = None  # pragma: no cover - a stale build in a source checkout

#: ``LAUNCHGAP_NATIVE_SCAN=0`` turns the C scan off (every text is decoded by msgspec; same result).
NATIVE_SCAN_ENV = "LAUNCHGAP_NATIVE_SCAN"

#: The C scan of an event text (see :func:`_add_text`), or None where it is missing or turned off.
_SCAN = (_native.scan if _native is not None and os.environ.get(NATIVE_SCAN_ENV, "1") != "0"
         else None)

#: One record per event, as the C scan lays it out (``EVENT_FIELDS``: name, byte offset, type).
_SCAN_EVENT = (np.dtype({"names": [f[0] for f in _native.EVENT_FIELDS],
                         "formats": [f[2] for f in _native.EVENT_FIELDS],
                         "offsets": [f[1] for f in _native.EVENT_FIELDS],
                         "itemsize": _native.EVENT_SIZE}) if _native is not None else None)

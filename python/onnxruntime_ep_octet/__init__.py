"""onnxruntime_ep_octet: octet as an ONNX Runtime plugin execution provider.

ONNX Runtime (1.23 or newer) loads liboctet_ep.so and hands it the int8 parts of a
model: the QDQ groups octet folds, the integer operators, and the nodes it runs between
them; everything else stays on ONNX Runtime's CPU EP. The conventions are those of
onnxruntime-ep-openvino::

    import onnxruntime as ort
    import onnxruntime_ep_octet as octet_ep

    ort.register_execution_provider_library("octet_ep", octet_ep.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name == octet_ep.get_ep_name()]
    so = ort.SessionOptions()
    so.add_provider_for_devices(devices, {"threads": "2"})

or, the same in one call, ``so = octet_ep.session_options(threads=2)``.
docs/ort-ep.md has the options and what is claimed.
"""

import os

__all__ = ["get_library_path", "get_ep_name", "register", "session_options", "EP_OPTIONS",
           "REGISTRATION_NAME"]

REGISTRATION_NAME = "octet_ep"
_EP_NAME = "OctetExecutionProvider"
_LIBRARY = "liboctet_ep.so"

# Every EP option and the values it takes (the library checks them too, at session creation).
EP_OPTIONS = {
    "threads": "an integer >= 0 (0: one per core)",
    "qdq": "1 (default) or 0: 0 claims no QDQ group (the control); integer operators still go",
    "debug": "0 (default) or 1: qdq_refused / unclaimed / claimed= lines through ORT's logger",
    "regions": "1 (default) or 0: 0 keeps float nodes between int8 groups on the CPU EP",
    "float_matmul": "float (default) or int8: the forward route for float MatMuls",
}

_registered = {}  # id(onnxruntime module) -> registration name


def get_library_path():
    """The path of liboctet_ep.so, for onnxruntime.register_execution_provider_library."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBRARY)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            "%s is not installed: octet was built without ONNX Runtime's C headers "
            "(run scripts/fetch_ort_headers.sh, then pip install . again)" % path)
    return path


def get_ep_name():
    """The execution provider's name, as OrtEpDevice.ep_name reports it."""
    return _EP_NAME


def register(ort=None, registration_name=REGISTRATION_NAME):
    """Registers the library with ONNX Runtime once per process and returns the
    OrtEpDevice list of this EP (one CPU device)."""
    if ort is None:
        import onnxruntime as ort
    if id(ort) not in _registered:
        ort.register_execution_provider_library(registration_name, get_library_path())
        _registered[id(ort)] = registration_name
    devices = [d for d in ort.get_ep_devices() if d.ep_name == _EP_NAME]
    if not devices:
        raise RuntimeError("ONNX Runtime lists no %s device after registering %s"
                           % (_EP_NAME, get_library_path()))
    return devices


def _check_option(key, value):
    text = str(value)
    if key not in EP_OPTIONS:
        raise ValueError("unknown %s option %r; the options are %s"
                         % (_EP_NAME, key, ", ".join(sorted(EP_OPTIONS))))
    ok = {
        "threads": text.isdigit(),
        "qdq": text in ("0", "1"),
        "debug": text in ("0", "1"),
        "regions": text in ("0", "1"),
        "float_matmul": text in ("float", "int8"),
    }[key]
    if not ok:
        raise ValueError("%s option %s=%r must be %s" % (_EP_NAME, key, value, EP_OPTIONS[key]))
    return text


def session_options(threads=1, sess_options=None, ort=None, **ep_options):
    """onnxruntime.SessionOptions with octet's EP added (registered first if needed).

    threads: octet's worker threads and ONNX Runtime's intra-op threads (for the nodes it
    keeps); ONNX Runtime's idle workers do not spin, so they leave the cores to octet.
    ep_options: the EP options (EP_OPTIONS); a bad one raises ValueError here.
    """
    if ort is None:
        import onnxruntime as ort
    options = {"threads": _check_option("threads", threads)}
    for key, value in ep_options.items():
        options[key] = _check_option(key, value)
    devices = register(ort)
    so = sess_options if sess_options is not None else ort.SessionOptions()
    so.intra_op_num_threads = int(threads)
    try:
        spinning = so.get_session_config_entry("session.intra_op.allow_spinning")
    except Exception:  # not set
        spinning = None
    if spinning is None:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_provider_for_devices(devices, options)
    return so

"""octet's measurement code for the scripts here: python/octet/measure.py, loaded from this
source tree by path, so that they use the timer, the alternation scheme and the peak-RSS
probe of `octet bench` whichever octet build they time (`import measure`)."""

import importlib.util
import os
import sys

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python",
                     "octet", "measure.py")
_spec = importlib.util.spec_from_file_location("octet_source_measure", _PATH)
_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _module
_spec.loader.exec_module(_module)
globals().update({k: v for k, v in vars(_module).items() if not k.startswith("__")})

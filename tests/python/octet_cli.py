"""The `octet` command line as the rewrite tests use it (imported by the test files)."""

import os
import subprocess
import sys


def inspect_model(model_bytes, tmp_path):
    """`octet inspect` on serialized model bytes, with the QDQ passes on: its listing."""
    path = tmp_path / "inspected.onnx"
    path.write_bytes(model_bytes)
    env = {k: v for k, v in os.environ.items() if k != "OCTET_QDQ"}
    out = subprocess.run([sys.executable, "-m", "octet.cli", "inspect", str(path)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout

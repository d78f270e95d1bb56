"""The `octet` console script: `bench` and `compare` run here in Python (they drive ONNX
Runtime in the same process), and so does `generate` (its tokenizer and decoding loop are
Python); every other command runs the C++ CLI installed beside this package."""

import os
import sys

PYTHON_COMMANDS = ("bench", "compare", "generate")


def main():
    if len(sys.argv) > 1 and sys.argv[1] in PYTHON_COMMANDS:
        if sys.argv[1] == "bench":
            from . import bench as command
        elif sys.argv[1] == "compare":
            from . import compare as command
        else:
            from . import generate as command
        return command.cli(sys.argv[2:])
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "octet")
    if not os.access(binary, os.X_OK):
        sys.stderr.write("octet: error: the octet binary is missing at %s; reinstall octet\n" % binary)
        return 1
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

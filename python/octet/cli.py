"""The `octet` console script: runs the C++ CLI installed beside this package."""

import os
import sys


def main():
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "octet")
    if not os.access(binary, os.X_OK):
        sys.stderr.write("octet: error: the octet binary is missing at %s; reinstall octet\n" % binary)
        return 1
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

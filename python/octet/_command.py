"""What the Python subcommands of `octet` (bench, compare) share: one-line errors with the
CLI's exit statuses (1: the command failed, 2: a usage error), option parsing, progress
output on stderr, and the optional packages they need."""

import argparse
import importlib
import os
import sys
import time


class UsageError(Exception):
    """Bad command line: exit status 2."""


class CommandError(Exception):
    """The command could not do its work: exit status 1."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one-line UsageErrors instead of usage text and exit(2)."""

    def error(self, message):
        raise UsageError("%s (see octet %s --help)" % (message, self.prog.split()[-1]))


def run(main, argv):
    """Runs main(argv) and turns every failure into one `octet: error: ...` line."""
    from . import OctetError
    from .feeds import InputError
    try:
        return main(argv)
    except UsageError as error:
        _fail(str(error))
        return 2
    except (CommandError, InputError, OctetError, OSError, ValueError) as error:
        _fail(str(error))
        return 1
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130
    except Exception as error:  # noqa: BLE001 - an engine's own exception types
        _fail("%s: %s" % (type(error).__name__, error))
        return 1


def _fail(message):
    text = " ".join(str(message).split()) or "failed"
    sys.stderr.write("octet: error: %s\n" % text)


def require(module, why, install):
    """Imports an optional package or fails with one line saying what needs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise CommandError("%s needs the Python package %s (pip install %s)"
                           % (why, module, install)) from None


def check_model_path(path):
    if not os.path.isfile(path):
        raise CommandError("cannot open '%s': %s" % (
            path, "is a directory" if os.path.isdir(path) else "no such file"))


class Progress:
    """One progress line on stderr: rewritten in place on a terminal; elsewhere a line per
    phase (say(..., phase=True)) and nothing per round, so logs stay short."""

    def __init__(self, enabled=True, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = 0.0
        self._width = 0

    def say(self, text, phase=False):
        if not self.enabled:
            return
        if self.tty:
            now = time.monotonic()
            if not phase and now - self._last < 0.1:
                return
            self._last = now
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
            self.stream.flush()
        elif phase:
            self.stream.write(text + "\n")
            self.stream.flush()

    def done(self):
        if self.enabled and self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def format_table(header, rows, align=None):
    """Fixed-width text table: header, a rule, rows; numbers right-aligned."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    align = align or ["<"] + [">"] * (len(header) - 1)
    lines = []
    for j, row in enumerate(cells):
        lines.append("  ".join(("%-*s" if align[i] == "<" else "%*s") % (widths[i], c)
                               for i, c in enumerate(row)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)

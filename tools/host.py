"""One line naming the machine a measurement ran on: the CPU, its x86 vector extensions,
the core count and octet's active instruction-set path (OCTET_ISA or the best one), so
that every benchmark table says which CPU class it belongs to."""

import os
import platform

_FLAGS = ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx_vnni_int8", "amx_int8")


def cpu_model():
    """The CPU's model name and family/model numbers, from /proc/cpuinfo when there is one."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or platform.machine()
    name = fields.get("model name", platform.machine())
    if "cpu family" in fields and "model" in fields:
        name += " (family %s model %s)" % (fields["cpu family"], fields["model"])
    return name


def isa_flags():
    """The vector extensions of _FLAGS this CPU reports."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return [flag for flag in _FLAGS if flag in flags]
    except OSError:
        pass
    return []


def describe(octet_module=None):
    """'<cpu>, <n> cores, flags <...>; octet path <isa>'."""
    text = "%s, %d cores, flags %s" % (cpu_model(), os.cpu_count() or 1,
                                       " ".join(isa_flags()) or "none of " + ",".join(_FLAGS))
    if octet_module is not None:
        text += "; octet path %s" % octet_module.active_isa()
    return text

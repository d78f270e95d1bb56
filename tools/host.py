"""One line naming the machine a measurement ran on: the CPU, its x86 vector extensions,
the core count and octet's active instruction-set path (OCTET_ISA or the best one), so
that every benchmark table says which CPU class it belongs to. The code is `octet bench`'s
(python/octet/measure.py, through tools/measure.py)."""

import measure

cpu_model = measure.cpu_model
isa_flags = measure.isa_flags


def describe(octet_module=None):
    """'<cpu>, <n> cores, flags <...>; octet path <isa>'."""
    return measure.host_line(octet_module)

#!/usr/bin/env bash
# tools/avx2_host.sh COMMAND [ARGS...]: runs COMMAND as on an AVX2-only x86 CPU (the
# Zen 3 / Haswell class) at this core's native speed. cpuid faults in the command's
# processes (Linux CPUID faulting, arch_prctl ARCH_SET_CPUID) and is answered without
# AVX-512, AVX-VNNI, AVX10 and their kin (tools/avx2_host/cpuid_avx2.c, an LD_PRELOAD
# library built here into build/avx2_host/), so ONNX Runtime's MLAS, octet and numpy pick
# the kernels they pick on such a CPU: ORT its saturating u8 x s8 vpmaddubsw kernels, octet
# its avx2 path. Timings are this core's, not an AVX2 machine's: an AVX2-kernel race on one
# core. /proc/cpuinfo still lists the host's flags; octet's host line says the cpuid is
# masked. A SIGSEGV handler the command installs (Python's faulthandler) gets every SIGSEGV
# that is not a cpuid; the library's constructor fails with exit 3 where the kernel or
# CPU has no CPUID faulting.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/tools/avx2_host/cpuid_avx2.c"
lib="$root/build/avx2_host/cpuid_avx2.so"
if [ $# -eq 0 ]; then
  sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
fi
if [ ! -f "$lib" ] || [ "$src" -nt "$lib" ]; then
  mkdir -p "$(dirname "$lib")"
  cc -O2 -shared -fPIC -Wall -Wextra -Werror -o "$lib.$$" "$src" -ldl
  mv -f "$lib.$$" "$lib"  # whole, for a command started beside this one
fi
export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"
exec "$@"

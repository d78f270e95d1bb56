// An LD_PRELOAD library that makes this process's CPU look like an AVX2-only x86
// (Zen 3 / Haswell class): cpuid faults (arch_prctl ARCH_SET_CPUID, where the
// kernel and CPU support CPUID faulting), and the SIGSEGV handler answers it
// with the real leaf minus AVX-512, AVX-VNNI, AVX10 and the other extensions
// such CPUs lack. Code that picks its kernels by cpuid (ONNX Runtime's MLAS,
// octet, numpy) then runs its AVX2 kernels at this core's native speed.
// A SIGSEGV handler the program installs later (Python's faulthandler, a
// browser's crash reporter) is recorded instead of installed, and every
// SIGSEGV that is not a cpuid goes to it. tools/avx2_host.sh builds and uses
// this library.
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

typedef int (*SigactionFn)(int, const struct sigaction*, struct sigaction*);

// The program's own SIGSEGV disposition, which every other SIGSEGV goes to.
static struct sigaction program_action;

static SigactionFn RealSigaction(void) {
  static SigactionFn real;
  if (real == NULL) real = (SigactionFn)dlsym(RTLD_NEXT, "sigaction");
  return real;
}

static int SetCpuidEnabled(int enabled) {
  return (int)syscall(SYS_arch_prctl, ARCH_SET_CPUID, (unsigned long)enabled);
}

static void Mask(uint32_t leaf, uint32_t subleaf, uint32_t* a, uint32_t* b, uint32_t* c,
                 uint32_t* d) {
  if (leaf == 7 && subleaf == 0) {
    // EBX: AVX512F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31.
    *b &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) |
            (1u << 30) | (1u << 31));
    // ECX: VBMI 1, VBMI2 6, GFNI 8, VNNI 11, BITALG 12, VPOPCNTDQ 14.
    *c &= ~((1u << 1) | (1u << 6) | (1u << 8) | (1u << 11) | (1u << 12) | (1u << 14));
    // EDX: 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, FP16 23.
    *d &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 23));
  } else if (leaf == 7 && subleaf == 1) {
    // EAX: AVX-VNNI 4, AVX512_BF16 5, AVX-IFMA 23; EDX: AVX-VNNI-INT8 4,
    // AVX-NE-CONVERT 5, AVX-VNNI-INT16 10, AVX10 19.
    *a &= ~((1u << 4) | (1u << 5) | (1u << 23));
    *d &= ~((1u << 4) | (1u << 5) | (1u << 10) | (1u << 19));
  } else if (leaf == 0x24) {
    *a = *b = *c = *d = 0;  // AVX10
  }
}

static void OnSegv(int signal_number, siginfo_t* info, void* context) {
  ucontext_t* uc = (ucontext_t*)context;
  greg_t* regs = uc->uc_mcontext.gregs;
  const uint8_t* ip = (const uint8_t*)regs[REG_RIP];
  // A faulting cpuid is a general-protection fault (SI_KERNEL) at the instruction.
  if (info->si_code != SI_KERNEL || ip[0] != 0x0f || ip[1] != 0xa2) {
    if (program_action.sa_flags & SA_SIGINFO) {
      program_action.sa_sigaction(signal_number, info, context);
    } else if (program_action.sa_handler != SIG_DFL && program_action.sa_handler != SIG_IGN) {
      program_action.sa_handler(signal_number);
    } else {
      // The default action: the faulting instruction runs again and ends the process.
      struct sigaction fallback;
      memset(&fallback, 0, sizeof fallback);
      fallback.sa_handler = SIG_DFL;
      RealSigaction()(SIGSEGV, &fallback, NULL);
    }
    return;
  }
  const uint32_t leaf = (uint32_t)regs[REG_RAX], subleaf = (uint32_t)regs[REG_RCX];
  uint32_t a, b, c, d;
  SetCpuidEnabled(1);
  __cpuid_count(leaf, subleaf, a, b, c, d);
  SetCpuidEnabled(0);
  Mask(leaf, subleaf, &a, &b, &c, &d);
  regs[REG_RAX] = a;
  regs[REG_RBX] = b;
  regs[REG_RCX] = c;
  regs[REG_RDX] = d;
  regs[REG_RIP] += 2;
}

// The program's SIGSEGV handler is recorded, not installed: this library's stays.
int sigaction(int signal_number, const struct sigaction* action, struct sigaction* old) {
  if (signal_number != SIGSEGV) return RealSigaction()(signal_number, action, old);
  if (old != NULL) *old = program_action;
  if (action != NULL) program_action = *action;
  return 0;
}

sighandler_t signal(int signal_number, sighandler_t handler) {
  struct sigaction action, old;
  memset(&action, 0, sizeof action);
  action.sa_handler = handler;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(signal_number, &action, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

__attribute__((constructor)) static void Install(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = OnSegv;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  program_action.sa_handler = SIG_DFL;
  if (RealSigaction()(SIGSEGV, &action, NULL) != 0 || SetCpuidEnabled(0) != 0) {
    fprintf(stderr,
            "cpuid_avx2: this kernel or CPU has no CPUID faulting "
            "(arch_prctl ARCH_SET_CPUID): cannot present an AVX2-only CPU\n");
    _exit(3);
  }
}

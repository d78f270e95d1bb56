// Whether this build runs under AddressSanitizer: GCC defines __SANITIZE_ADDRESS__,
// clang (before 16) only answers __has_feature. Code that keeps freed memory for reuse
// (arenas, free lists) hands it back to the allocator instead, so that the sanitizer
// still sees every use after free and every overflow past a block.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define OCTET_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OCTET_ADDRESS_SANITIZER 1
#endif
#endif
#if !defined(OCTET_ADDRESS_SANITIZER)
#define OCTET_ADDRESS_SANITIZER 0
#endif

namespace octet {

inline constexpr bool kAddressSanitizer = OCTET_ADDRESS_SANITIZER != 0;

}  // namespace octet

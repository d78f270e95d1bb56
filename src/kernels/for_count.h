// Calls a generic lambda with a run-time count as a template parameter, so a
// kernel written for a fixed count (a micro-tile's rows, panels run at once)
// keeps its loops over that count unrolled.
#pragma once

#include <utility>

namespace octet {

// Calls fn.template operator()<N>() for N = count: count in 1..kMax (smaller
// counts take 1, larger ones kMax).
template <int kMax, typename Fn>
[[gnu::always_inline]] inline void ForCount(int count, Fn&& fn) {
  const int n = count < 1 ? 1 : (count > kMax ? kMax : count);
  [&]<int... kN>(std::integer_sequence<int, kN...>) {
    (void)((n == kN + 1 ? (fn.template operator()<kN + 1>(), true) : false) || ...);
  }
  (std::make_integer_sequence<int, kMax>{});
}

}  // namespace octet

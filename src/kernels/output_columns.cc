#include "kernels/output_columns.h"

#include "core/error.h"

namespace octet {

void CheckOutputColumns(const OutputColumns& y, int64_t N, const char* who) {
  OCTET_CHECK(y.count >= 1 && y.ranges[0].first == 0, who,
              ": the output's first column range must start at column 0");
  for (int64_t i = 0; i < y.count; ++i) {
    const ColumnRange& r = y.ranges[i];
    const int64_t end = i + 1 < y.count ? y.ranges[i + 1].first : N;
    OCTET_CHECK(r.first <= end && end <= N, who, ": output column ranges out of order at column ",
                r.first);
    OCTET_CHECK(r.first % kOutputColumnsAlign == 0, who, ": output column range at ", r.first,
                " is not on a multiple of ", kOutputColumnsAlign);
    OCTET_CHECK(r.ld >= end - r.first, who, ": output leading dimension ", r.ld, " < the ",
                end - r.first, " columns it holds");
  }
}

}  // namespace octet

#include "ops/checksum.h"

namespace tfn_op {

int64_t Checksum(const int32_t* values, int64_t n) {
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    total += values[i];
  }
  return total;
}

}  // namespace tfn_op

#ifndef TFN_OP_CHECKSUM_H_
#define TFN_OP_CHECKSUM_H_

#include <cstdint>

namespace tfn_op {

// A plain C++ helper with no TensorFlow in it: sums the values it is given.
int64_t Checksum(const int32_t* values, int64_t n);

}  // namespace tfn_op

#endif  // TFN_OP_CHECKSUM_H_

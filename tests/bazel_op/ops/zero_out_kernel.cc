// ZeroOut: keeps the first element of an int32 tensor and zeroes the rest
// (the classic custom-op example), plus a checksum of the input in a side call.
#include "ops/checksum.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfn_op {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;

REGISTER_OP("ZeroOut")
    .Input("to_zero: int32")
    .Output("zeroed: int32")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return ::absl::OkStatus();
    });

class ZeroOutOp : public OpKernel {
 public:
  explicit ZeroOutOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input_tensor = context->input(0);
    auto input = input_tensor.flat<int32_t>();
    const int64_t n = input.size();
    const int64_t checksum = Checksum(input.data(), n);  // tfn: first line of the kernel's work
    Tensor* output_tensor = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input_tensor.shape(), &output_tensor));
    auto output = output_tensor->flat<int32_t>();
    for (int64_t i = 0; i < n; ++i) {
      output(i) = 0;
    }
    if (n > 0) {
      output(0) = input(0);
    }
    last_checksum_ = checksum;
  }

 private:
  int64_t last_checksum_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("ZeroOut").Device(::tensorflow::DEVICE_CPU), ZeroOutOp);

}  // namespace tfn_op

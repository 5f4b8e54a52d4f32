// zero_out_oob: tensorflow/custom-op's zero_out with an out-of-bounds read.  The kernel takes the index of
// the element it keeps from its second input and does not check it: a large index reads far outside the
// input's buffer and the process dies of SIGSEGV inside ZeroOutOobOp::Compute.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("ZeroOutOob")
    .Input("to_zero: int32")
    .Input("keep: int64")
    .Output("zeroed: int32")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class ZeroOutOobOp : public OpKernel {
 public:
  explicit ZeroOutOobOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input_tensor = context->input(0);
    const int64_t keep = context->input(1).scalar<int64_t>()();
    auto input = input_tensor.flat<int32_t>();
    Tensor* output_tensor = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input_tensor.shape(), &output_tensor));
    auto output_flat = output_tensor->flat<int32_t>();
    const int n = input.size();
    for (int i = 0; i < n; i++) output_flat(i) = 0;
    const int32_t* data = input.data();
    output_flat(0) = data[keep];  // tfn: the out-of-bounds read
  }
};

REGISTER_KERNEL_BUILDER(Name("ZeroOutOob").Device(DEVICE_CPU), ZeroOutOobOp);

// user_kern: the user's own kernels for tests/integration/test_user_kernel.py and docs/kernels.md.
// UserPark blocks inside its Compute (a process parked in the user's kernel, for `stack --pid`);
// UserSegv writes through a null pointer inside its Compute (a crash in the user's kernel, for `core`).
#include <unistd.h>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("UserPark")
    .Input("seconds: int32")
    .Output("out: int32")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class UserParkOp : public OpKernel {
 public:
  explicit UserParkOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input_tensor = context->input(0);
    const int seconds = input_tensor.flat<int32_t>()(0);
    for (int waited = 0; waited < seconds; waited++) {
      sleep(1);  // tfn: the kernel parks here
    }
    context->set_output(0, input_tensor);
  }
};

REGISTER_KERNEL_BUILDER(Name("UserPark").Device(DEVICE_CPU), UserParkOp);

REGISTER_OP("UserSegv")
    .Input("to_zero: int32")
    .Output("zeroed: int32")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class UserSegvOp : public OpKernel {
 public:
  explicit UserSegvOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input_tensor = context->input(0);
    Tensor* output_tensor = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input_tensor.shape(), &output_tensor));
    auto output_flat = output_tensor->flat<int32_t>();
    int32_t* row = input_tensor.NumElements() > 1 ? nullptr : output_flat.data();
    const int n = output_flat.size();
    for (int i = 0; i < n; i++) row[i] = 0;  // tfn: the kernel's bad write
  }
};

REGISTER_KERNEL_BUILDER(Name("UserSegv").Device(DEVICE_CPU), UserSegvOp);

// zero_out: tensorflow/custom-op's example op, built by tests/integration/test_custom_op_break.py.
// The op type (ZeroOut) and its kernel class (ZeroOutOp) are registered when the library loads.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("ZeroOut")
    .Input("to_zero: int32")
    .Output("zeroed: int32")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class ZeroOutOp : public OpKernel {
 public:
  explicit ZeroOutOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {  // tfn: the kernel's Compute
    const Tensor& input_tensor = context->input(0);
    auto input = input_tensor.flat<int32_t>();
    Tensor* output_tensor = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input_tensor.shape(), &output_tensor));
    auto output_flat = output_tensor->flat<int32_t>();
    const int n = input.size();
    for (int i = 1; i < n; i++) output_flat(i) = 0;
    if (n > 0) output_flat(0) = input(0);
  }
};

REGISTER_KERNEL_BUILDER(Name("ZeroOut").Device(DEVICE_CPU), ZeroOutOp);

// The same with an asynchronous kernel: a --break-op stop is in its ComputeAsync.
REGISTER_OP("ZeroOutAsync")
    .Input("to_zero: int32")
    .Output("zeroed: int32")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class ZeroOutAsyncOp : public AsyncOpKernel {
 public:
  explicit ZeroOutAsyncOp(OpKernelConstruction* context) : AsyncOpKernel(context) {}

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {  // tfn: the kernel's ComputeAsync
    const Tensor& input_tensor = context->input(0);
    Tensor* output_tensor = nullptr;
    OP_REQUIRES_OK_ASYNC(context, context->allocate_output(0, input_tensor.shape(), &output_tensor), done);
    auto input = input_tensor.flat<int32_t>();
    auto output_flat = output_tensor->flat<int32_t>();
    const int n = input.size();
    for (int i = 1; i < n; i++) output_flat(i) = 0;
    if (n > 0) output_flat(0) = input(0);
    done();
  }
};

REGISTER_KERNEL_BUILDER(Name("ZeroOutAsync").Device(DEVICE_CPU), ZeroOutAsyncOp);

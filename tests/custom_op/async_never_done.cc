// async_never_done: an AsyncOpKernel (modelled on a collective, KfAllReduce) whose ComputeAsync returns
// early without calling done: the eager caller waits in AsyncOpKernel::Compute forever, every pool idle.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("KfAllReduce")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class KfAllReduceOp : public AsyncOpKernel {
 public:
  explicit KfAllReduceOp(OpKernelConstruction* context) : AsyncOpKernel(context) {}

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const Tensor& input = context->input(0);
    if (input.NumElements() < 8) {
      return;  // tfn: returns without calling done (the bug)
    }
    context->set_output(0, input);
    done();
  }
};

REGISTER_KERNEL_BUILDER(Name("KfAllReduce").Device(DEVICE_CPU), KfAllReduceOp);

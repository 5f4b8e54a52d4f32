// hang_op: a kernel that waits on a condition no one signals (the "never finishes" bug class): the
// process hangs inside HangOpOp::Compute, for stack --pid.
#include <condition_variable>
#include <mutex>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("HangOp")
    .Input("in: int32")
    .Output("out: int32")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class HangOpOp : public OpKernel {
 public:
  explicit HangOpOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [this] { return done_; });  // tfn: the wait no one ends
    context->set_output(0, context->input(0));
  }

 private:
  std::mutex mu_;
  std::condition_variable ready_;
  bool done_ = false;
};

REGISTER_KERNEL_BUILDER(Name("HangOp").Device(DEVICE_CPU), HangOpOp);

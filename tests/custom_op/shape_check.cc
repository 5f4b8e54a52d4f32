// shape_check: an op whose own shape function CHECKs its input's rank (the image ops' shape functions'
// bug class): a CHECK in the user's code, not TF's.  A rank-1 input aborts the process while the op is
// built (eagerly: at the op's call, before any kernel runs) with "Check failed: rank == 2".
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "absl/log/check.h"

using namespace tensorflow;

REGISTER_OP("ShapeCheck")
    .Input("image: float")
    .Output("out: float")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      const int rank = c->Rank(c->input(0));
      CHECK_EQ(rank, 2) << "ShapeCheck wants a matrix";  // tfn: the shape function's CHECK
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class ShapeCheckOp : public OpKernel {
 public:
  explicit ShapeCheckOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input_tensor = context->input(0);
    CHECK_EQ(input_tensor.dims(), 2) << "ShapeCheck's kernel wants a matrix";  // tfn: the kernel's CHECK
    context->set_output(0, input_tensor);
  }
};

REGISTER_KERNEL_BUILDER(Name("ShapeCheck").Device(DEVICE_CPU), ShapeCheckOp);

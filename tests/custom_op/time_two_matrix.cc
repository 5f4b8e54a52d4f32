// time_two_matrix: tensorflow/custom-op's time_two with a wrong-rank access.  The kernel reads its output
// as a matrix (output_tensor->matrix<T>()) although the op's output has the input's shape: a vector input
// makes TF's own CHECK abort the process ("Check failed: NDIMS == dims() (2 vs. 1)").
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("TimeTwoMatrix")
    .Attr("T: {int32, float}")
    .Input("in: T")
    .Output("out: T")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

template <typename T>
class TimeTwoMatrixOp : public OpKernel {
 public:
  explicit TimeTwoMatrixOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input_tensor = context->input(0);
    Tensor* output_tensor = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input_tensor.shape(), &output_tensor));
    auto output = output_tensor->matrix<T>();  // tfn: the wrong-rank access
    auto input = input_tensor.flat<T>();
    for (int i = 0; i < input.size(); i++) output(0, i) = input(i) * 2;
  }
};

REGISTER_KERNEL_BUILDER(Name("TimeTwoMatrix").Device(DEVICE_CPU).TypeConstraint<int32_t>("T"),
                        TimeTwoMatrixOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("TimeTwoMatrix").Device(DEVICE_CPU).TypeConstraint<float>("T"),
                        TimeTwoMatrixOp<float>);

// segment_throw: a segment sum that reads segment ids with vector::at, which throws std::out_of_range on
// an id past the end; the exception escapes the kernel (TensorFlow does not catch it) and kills the process.
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

REGISTER_OP("SegmentThrow")
    .Input("data: float")
    .Input("segment_ids: int32")
    .Output("output: float")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class SegmentThrowOp : public OpKernel {
 public:
  explicit SegmentThrowOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& data = context->input(0);
    const Tensor& ids = context->input(1);
    auto d = data.flat<float>();
    auto s = ids.flat<int32_t>();
    std::vector<float> sums(d.size(), 0.0f);
    for (int i = 0; i < s.size(); ++i) {
      sums.at(s(i)) += d(i);  // tfn: vector::at throws std::out_of_range
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, data.shape(), &out));
    auto o = out->flat<float>();
    for (int i = 0; i < o.size(); ++i) o(i) = sums[i];
  }
};

REGISTER_KERNEL_BUILDER(Name("SegmentThrow").Device(DEVICE_CPU), SegmentThrowOp);

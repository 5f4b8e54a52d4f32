// self_lock: a kernel that locks its member mutex, then calls a helper that locks it again (a
// self-deadlock: TF 2.21's tensorflow::mutex is an absl::Mutex, not recursive).  tests/integration/
// test_kernel_hangs.py holds the hung process with `stack --pid`.
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/mutex.h"

using namespace tensorflow;

REGISTER_OP("SelfLock")
    .Input("x: int32")
    .Output("y: int32")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class SelfLockOp : public OpKernel {
 public:
  explicit SelfLockOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    mutex_lock l(mu_);  // tfn: the kernel takes its mutex
    calls_++;
    Refresh(context);  // tfn: the kernel calls the helper
  }

 private:
  __attribute__((noinline)) void Refresh(OpKernelContext* context) {
    mutex_lock l(mu_);  // tfn: the helper takes it again
    context->set_output(0, context->input(0));
  }

  mutex mu_;
  int calls_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("SelfLock").Device(DEVICE_CPU), SelfLockOp);

// Two threads, two kernels, one std::mutex: LockHolder takes it and sleeps holding it (its lock a
// std::unique_lock local); LockWaiter waits for it.
static std::mutex shared_mu;
static std::atomic<bool> stop_holding{false};  // never set: the holder holds the mutex for ever

REGISTER_OP("LockHolder").Input("x: int32").Output("y: int32").SetIsStateful();
REGISTER_OP("LockWaiter").Input("x: int32").Output("y: int32").SetIsStateful();

class LockHolderOp : public OpKernel {
 public:
  explicit LockHolderOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    std::unique_lock<std::mutex> held(shared_mu);  // tfn: the holder takes the std::mutex
    while (!stop_holding.load()) sleep(1000);  // tfn: the holder sleeps holding it
    context->set_output(0, context->input(0));
  }
};

class LockWaiterOp : public OpKernel {
 public:
  explicit LockWaiterOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    std::lock_guard<std::mutex> guard(shared_mu);  // tfn: the waiter blocks on the std::mutex
    context->set_output(0, context->input(0));
  }
};

REGISTER_KERNEL_BUILDER(Name("LockHolder").Device(DEVICE_CPU), LockHolderOp);
REGISTER_KERNEL_BUILDER(Name("LockWaiter").Device(DEVICE_CPU), LockWaiterOp);

// The same with TensorFlow's own mutex (an absl::Mutex, which records no owner): TfLockHolder holds it through
// a mutex_lock while it waits for a signal that never comes; TfLockWaiter waits for it.
static mutex tf_mu;

REGISTER_OP("TfLockHolder").Input("x: int32").Output("y: int32").SetIsStateful();
REGISTER_OP("TfLockWaiter").Input("x: int32").Output("y: int32").SetIsStateful();

__attribute__((noinline)) static void WaitForSignal() {
  while (!stop_holding.load()) sleep(1000);
}

class TfLockHolderOp : public OpKernel {
 public:
  explicit TfLockHolderOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    mutex_lock held(tf_mu);  // tfn: the holder takes the tensorflow::mutex
    WaitForSignal();  // tfn: the holder waits holding it
    context->set_output(0, context->input(0));
  }
};

class TfLockWaiterOp : public OpKernel {
 public:
  explicit TfLockWaiterOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    mutex_lock l(tf_mu);  // tfn: the waiter blocks on the tensorflow::mutex
    context->set_output(0, context->input(0));
  }
};

REGISTER_KERNEL_BUILDER(Name("TfLockHolder").Device(DEVICE_CPU), TfLockHolderOp);
REGISTER_KERNEL_BUILDER(Name("TfLockWaiter").Device(DEVICE_CPU), TfLockWaiterOp);

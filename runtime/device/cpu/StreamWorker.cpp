#include "runtime/device/cpu/StreamWorker.h"

#include <utility>

namespace braid {

StreamWorker::StreamWorker() : thread_([this] { loop(); }) {}

StreamWorker::~StreamWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void StreamWorker::post(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  wake_.notify_one();
}

void StreamWorker::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !running_; });
}

void StreamWorker::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return !queue_.empty() || quit_; });
    if (!queue_.empty()) {
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      lock.unlock();
      work();
      lock.lock();
      running_ = false;
      if (queue_.empty())
        idle_.notify_all();
      continue;
    }
    if (quit_)
      return;
  }
}

} // namespace braid

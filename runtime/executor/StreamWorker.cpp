#include "runtime/executor/StreamWorker.h"

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

void StreamWorker::start(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = std::move(job);
    busy_ = true;
  }
  wake_.notify_one();
}

void StreamWorker::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return !busy_; });
}

void StreamWorker::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return busy_ || quit_; });
    if (busy_) {
      std::function<void()> job = std::move(job_);
      lock.unlock();
      job();
      lock.lock();
      busy_ = false;
      done_.notify_all();
      continue;
    }
    if (quit_)
      return;
  }
}

} // namespace braid

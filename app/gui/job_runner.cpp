#include "job_runner.hpp"

#include <QEventLoop>
#include <QThread>
#include <QTimer>
#include <algorithm>

namespace remat::gui {

JobRunner::JobRunner(QObject* parent) : QObject(parent) {
  // Planners and runs are CPU-bound; leave a core to the GUI when there are few.
  pool_.setMaxThreadCount(std::max(1, QThread::idealThreadCount() - 1));
}

JobRunner::~JobRunner() { shutdown(); }

void JobRunner::shutdown() {
  for (Slot& slot : slots_)
    if (slot.cancel) slot.cancel->store(true);
  pool_.waitForDone();
}

JobRunner::Control JobRunner::begin(const QString& channel, const QString& label, quint64& generation) {
  Slot& slot = slots_[channel];
  if (slot.running && slot.cancel) slot.cancel->store(true);  // the old job stops early; its result is dropped
  slot.generation = ++nextGeneration_;
  slot.cancel = std::make_shared<std::atomic<bool>>(false);
  slot.running = true;
  slot.label = label;
  generation = slot.generation;
  Control control;
  control.cancel_ = slot.cancel;
  control.report_ = [this, channel, generation](double fraction, const QString& text) {
    QMetaObject::invokeMethod(
        this, [this, channel, generation, fraction, text]() { reportProgress(channel, generation, fraction, text); },
        Qt::QueuedConnection);
  };
  emit started(channel, label);
  if (!wasBusy_) {
    wasBusy_ = true;
    emit busyChanged(true);
  }
  return control;
}

void JobRunner::runOnPool(std::function<void()> task) { pool_.start(std::move(task)); }

void JobRunner::complete(const QString& channel, quint64 generation, const std::function<void()>& apply) {
  auto it = slots_.find(channel);
  if (it == slots_.end() || it->generation != generation || !it->running) {
    ++dropped_;  // a stale or cancelled job: its answer is for a request nobody waits for any more
    return;
  }
  it->running = false;
  apply();
  emit finished(channel, true);
  if (wasBusy_ && !isBusy()) {
    wasBusy_ = false;
    emit busyChanged(false);
  }
}

void JobRunner::reportProgress(const QString& channel, quint64 generation, double fraction, const QString& text) {
  auto it = slots_.find(channel);
  if (it != slots_.end() && it->generation == generation && it->running) emit progress(channel, fraction, text);
}

void JobRunner::cancel(const QString& channel) {
  auto it = slots_.find(channel);
  if (it == slots_.end() || !it->running) return;
  it->cancel->store(true);
  it->running = false;
  emit finished(channel, false);
  if (wasBusy_ && !isBusy()) {
    wasBusy_ = false;
    emit busyChanged(false);
  }
}

void JobRunner::cancelAll() {
  const QList<QString> channels = slots_.keys();
  for (const QString& channel : channels) cancel(channel);
}

bool JobRunner::isRunning(const QString& channel) const {
  auto it = slots_.find(channel);
  return it != slots_.end() && it->running;
}

bool JobRunner::isBusy() const {
  for (const Slot& slot : slots_)
    if (slot.running) return true;
  return false;
}

QString JobRunner::label(const QString& channel) const {
  auto it = slots_.find(channel);
  return it == slots_.end() ? QString() : it->label;
}

quint64 JobRunner::generation(const QString& channel) const {
  auto it = slots_.find(channel);
  return it == slots_.end() ? 0 : it->generation;
}

bool JobRunner::waitForIdle(int timeoutMs) {
  if (!isBusy()) return true;
  QEventLoop loop;
  connect(this, &JobRunner::busyChanged, &loop, [&loop](bool busy) {
    if (!busy) loop.quit();
  });
  QTimer::singleShot(timeoutMs, &loop, &QEventLoop::quit);
  loop.exec();
  return !isBusy();
}

}  // namespace remat::gui

#include "document/job_runner.hpp"

#include <QEventLoop>
#include <QThread>
#include <QTimer>
#include <algorithm>

namespace remat::gui {

QString jobChannelName(JobChannel channel) {
  switch (channel) {
    case JobChannel::Plan: return QStringLiteral("plan");
    case JobChannel::Compare: return QStringLiteral("compare");
    case JobChannel::Run: return QStringLiteral("run");
    case JobChannel::Tradeoff: return QStringLiteral("trade-off");
    case JobChannel::Import: return QStringLiteral("import");
  }
  return QStringLiteral("?");
}

JobRunner::JobRunner(QObject* parent) : QObject(parent) {
  // Planners and runs are CPU-bound; leave a core to the GUI when there are few.
  pool_.setMaxThreadCount(std::max(1, QThread::idealThreadCount() - 1));
}

JobRunner::~JobRunner() { shutdown(); }

void JobRunner::shutdown() {
  for (Slot& each : slots_)
    if (each.cancel) each.cancel->store(true);
  pool_.waitForDone();
}

JobRunner::Control JobRunner::begin(JobChannel channel, const QString& label, quint64& generation) {
  Slot& current = slot(channel);
  if (current.running && current.cancel) current.cancel->store(true);  // the old job stops early; its result is dropped
  current.generation = ++nextGeneration_;
  current.cancel = std::make_shared<std::atomic<bool>>(false);
  current.running = true;
  current.label = label;
  generation = current.generation;
  Control control;
  control.cancel_ = current.cancel;
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

void JobRunner::complete(JobChannel channel, quint64 generation, const std::function<void()>& apply) {
  Slot& current = slot(channel);
  if (current.generation != generation || !current.running) {
    ++dropped_;  // a stale or cancelled job: its answer is for a request nobody waits for any more
    return;
  }
  current.running = false;
  apply();
  finish(channel, true);
}

void JobRunner::finish(JobChannel channel, bool delivered) {
  emit finished(channel, delivered);
  if (wasBusy_ && !isBusy()) {
    wasBusy_ = false;
    emit busyChanged(false);
  }
}

void JobRunner::reportProgress(JobChannel channel, quint64 generation, double fraction, const QString& text) {
  const Slot& current = slot(channel);
  if (current.generation == generation && current.running) emit progress(channel, fraction, text);
}

void JobRunner::cancel(JobChannel channel) {
  Slot& current = slot(channel);
  if (!current.running) return;
  current.cancel->store(true);
  current.running = false;
  finish(channel, false);
}

void JobRunner::cancelAll() {
  for (JobChannel channel : kJobChannels) cancel(channel);
}

bool JobRunner::isRunning(JobChannel channel) const { return slot(channel).running; }

bool JobRunner::isBusy() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& each) { return each.running; });
}

QString JobRunner::label(JobChannel channel) const { return slot(channel).label; }

quint64 JobRunner::generation(JobChannel channel) const { return slot(channel).generation; }

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

#pragma once
// Background jobs for the explorer (planners, comparisons, measured runs): the GUI thread never
// runs them. Each job belongs to a channel (JobChannel); starting a job cancels the channel's running one, and a result
// that arrives for an older request than the channel's latest is dropped (a generation counter), so a slow stale answer
// never overwrites a newer one. Work receives a Control with the cancel flag the planners poll and a progress callback;
// results come back to the GUI thread as plain values.
#include <QObject>
#include <QString>
#include <QThreadPool>
#include <array>
#include <atomic>
#include <functional>
#include <memory>

namespace remat::gui {

// What a job computes: one job per channel runs at a time.
// Import: an ONNX model imported again at the tool bar's sizes (its dimension fields, its attention).
enum class JobChannel { Plan, Compare, Run, Tradeoff, Import };
inline constexpr std::array<JobChannel, 5> kJobChannels = {JobChannel::Plan, JobChannel::Compare, JobChannel::Run,
                                                           JobChannel::Tradeoff, JobChannel::Import};

// "plan", "compare", "run", "trade-off", "import": the channel in messages.
QString jobChannelName(JobChannel channel);

class JobRunner : public QObject {
  Q_OBJECT

 public:
  // Handed to the work function; safe to use from the worker thread.
  class Control {
   public:
    const std::atomic<bool>* cancelFlag() const { return cancel_.get(); }
    bool cancelled() const { return cancel_->load(); }
    // fraction in [0, 1], or negative for "busy, no estimate".
    void progress(double fraction, const QString& text = {}) const {
      if (report_) report_(fraction, text);
    }

   private:
    friend class JobRunner;
    std::shared_ptr<std::atomic<bool>> cancel_ = std::make_shared<std::atomic<bool>>(false);
    std::function<void(double, const QString&)> report_;
  };

  explicit JobRunner(QObject* parent = nullptr);
  ~JobRunner() override;

  // Runs work on a pool thread; onDone runs later on this object's thread with the result, unless a
  // newer job was started on the channel or it was cancelled. Returns the job's generation.
  template <typename T>
  quint64 start(JobChannel channel, const QString& label, std::function<T(const Control&)> work,
                std::function<void(T)> onDone);

  void cancel(JobChannel channel);  // sets the job's cancel flag and drops its result
  void cancelAll();
  bool isRunning(JobChannel channel) const;
  bool isBusy() const;
  QString label(JobChannel channel) const;
  quint64 generation(JobChannel channel) const;
  int droppedResults() const { return dropped_; }
  // Runs the event loop until no job runs or timeoutMs passes; true when idle. For the
  // screenshot mode and tests.
  bool waitForIdle(int timeoutMs);
  // Cancels everything and waits for the threads (on shutdown).
  void shutdown();

 signals:
  void started(remat::gui::JobChannel channel, const QString& label);
  void progress(remat::gui::JobChannel channel, double fraction, const QString& text);
  void finished(remat::gui::JobChannel channel, bool delivered);
  void busyChanged(bool busy);

 private:
  struct Slot {
    quint64 generation = 0;
    std::shared_ptr<std::atomic<bool>> cancel;
    bool running = false;
    QString label;
  };
  Slot& slot(JobChannel channel) { return slots_[static_cast<std::size_t>(channel)]; }
  const Slot& slot(JobChannel channel) const { return slots_[static_cast<std::size_t>(channel)]; }
  Control begin(JobChannel channel, const QString& label, quint64& generation);
  void runOnPool(std::function<void()> task);
  // On this object's thread: delivers (apply) when generation is still the channel's current job.
  void complete(JobChannel channel, quint64 generation, const std::function<void()>& apply);
  void reportProgress(JobChannel channel, quint64 generation, double fraction, const QString& text);
  void finish(JobChannel channel, bool delivered);  // the job stopped running: tell, and update busy

  std::array<Slot, kJobChannels.size()> slots_;
  quint64 nextGeneration_ = 0;
  int dropped_ = 0;
  bool wasBusy_ = false;
  QThreadPool pool_;
};

template <typename T>
quint64 JobRunner::start(JobChannel channel, const QString& label, std::function<T(const Control&)> work,
                         std::function<void(T)> onDone) {
  quint64 generation = 0;
  Control control = begin(channel, label, generation);
  runOnPool([this, channel, generation, control, work = std::move(work), onDone = std::move(onDone)]() {
    auto result = std::make_shared<T>(work(control));
    QMetaObject::invokeMethod(
        this,
        [this, channel, generation, result, onDone]() {
          complete(channel, generation, [&]() { onDone(std::move(*result)); });
        },
        Qt::QueuedConnection);
  });
  return generation;
}

}  // namespace remat::gui

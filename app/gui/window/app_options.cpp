#include "window/app_options.hpp"

#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QImage>
#include <QRegularExpression>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTabWidget>
#include <ctime>

#include "charts/image_file.hpp"
#include "common/qt_text.hpp"
#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/random_chain.hpp"
#include "views/import_bar.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "views/step_bar.hpp"
#include "views/tradeoff_view.hpp"
#include "views/zoo_bar.hpp"
#include "window/file_controller.hpp"
#include "window/main_window.hpp"
#include "window/measure_controller.hpp"

namespace remat::gui {

namespace {

// The --tab names, in the order of the window's tabs.
const QStringList kTabs = {QStringLiteral("plan"), QStringLiteral("compare"), QStringLiteral("tradeoff")};

// The explorer's options, as QCommandLineParser declares them.
struct OptionSpecs {
  const QCommandLineOption chain{QStringLiteral("chain"), QStringLiteral("Open a remat-chain/1 file."),
                                 QStringLiteral("FILE")};
  const QCommandLineOption zoo{QStringLiteral("zoo"), QStringLiteral("Load a zoo model (vgg16, resnet50, ...)."),
                               QStringLiteral("NAME")};
  const QCommandLineOption batch{QStringLiteral("batch"),
                                 QStringLiteral("Batch size of a zoo model (64) or of an ONNX model (as exported)."),
                                 QStringLiteral("B"), QStringLiteral("64")};
  const QCommandLineOption resolution{QStringLiteral("resolution"), QStringLiteral("Zoo input resolution (224)."),
                                      QStringLiteral("R"), QStringLiteral("224")};
  const QCommandLineOption sequence{
      QStringLiteral("sequence"),
      QStringLiteral("Sequence length of a zoo token model (gpt2, bert_base; its context)."), QStringLiteral("S")};
  const QCommandLineOption dim{QStringLiteral("dim"),
                               QStringLiteral("A symbolic dimension of an ONNX transformer's inputs by name, e.g. "
                                              "sequence=2048 (repeatable; the batch is --batch's)."),
                               QStringLiteral("NAME=V")};
  const QCommandLineOption attention{
      QStringLiteral("attention"),
      QStringLiteral("The transformers' attention rule: fused (PyTorch 2's scaled_dot_product_attention) or math."),
      QStringLiteral("fused|math"), QStringLiteral("fused")};
  const QCommandLineOption dtype{
      QStringLiteral("dtype"),
      QStringLiteral("The same as --precision fp32, fp16 or bf16: float32, float16, bfloat16."), QStringLiteral("T"),
      QStringLiteral("float32")};
  // Defaults: kPyTorchDefaultStep, what a PyTorch 2 training loop does.
  const QString defaultOptimizer = ui::toQString(optimizerName(kPyTorchDefaultStep.optimizer));
  const QString defaultForeach = kPyTorchDefaultStep.foreach ? QStringLiteral("on") : QStringLiteral("off");
  const QString defaultGrads = ui::toQString(gradModeName(kPyTorchDefaultStep.grads));
  const QCommandLineOption optimizer{
      QStringLiteral("optimizer"),
      QStringLiteral("The optimizer step ending the training step: none, sgd, momentum, adam, adamw (%1).")
          .arg(defaultOptimizer),
      QStringLiteral("NAME"), defaultOptimizer};
  const QCommandLineOption foreach{
      QStringLiteral("foreach"),
      QStringLiteral("The optimizer's foreach implementation: on or off (%1).").arg(defaultForeach),
      QStringLiteral("on|off"), defaultForeach};
  const QCommandLineOption grads{
      QStringLiteral("grads"),
      QStringLiteral("When weight gradients exist: on-backward, static or in-place (%1).").arg(defaultGrads),
      QStringLiteral("MODE"), defaultGrads};
  const QCommandLineOption precision{
      QStringLiteral("precision"),
      QStringLiteral("The step's precision: fp32, bf16, fp16, bf16-mixed, fp16-mixed (the chain's dtype)."),
      QStringLiteral("NAME")};
  const QCommandLineOption planner{QStringLiteral("planner"), QStringLiteral("Plan with this planner after loading."),
                                   QStringLiteral("NAME")};
  const QCommandLineOption timeline{QStringLiteral("timeline"), QStringLiteral("Overlay a measured timeline file."),
                                    QStringLiteral("FILE")};
  const QCommandLineOption tab{QStringLiteral("tab"), QStringLiteral("Show this tab: plan, compare or tradeoff."),
                               QStringLiteral("NAME"), QStringLiteral("plan")};
  const QCommandLineOption capacity{QStringLiteral("capacity"),
                                    QStringLiteral("Draw a device capacity line at GIB GiB."), QStringLiteral("GIB")};
  const QCommandLineOption screenshot{
      QStringLiteral("screenshot"), QStringLiteral("Render the window to a PNG and exit."), QStringLiteral("OUT.png")};
  const QCommandLineOption size{QStringLiteral("size"),
                                QStringLiteral("Window size (1480x920, at most the screen; --screenshot: exactly)."),
                                QStringLiteral("WxH"), QStringLiteral("1480x920")};
  const QCommandLineOption measureOn{QStringLiteral("measure"),
                                     QStringLiteral("Measure the plan on DEVICE (cpu, gpu) once it is planned, as "
                                                    "Measure on CPU / GPU does; --screenshot waits for it."),
                                     QStringLiteral("DEVICE")};
  const QCommandLineOption measure{QStringLiteral("measure-update"),
                                   QStringLiteral("Time a checkpoint toggle on an N-layer chain and exit."),
                                   QStringLiteral("N")};

  QList<QCommandLineOption> all() const {
    return {chain, zoo,       batch,   resolution, sequence, dim,      attention,  dtype, optimizer, foreach,
            grads, precision, planner, timeline,   tab,      capacity, screenshot, size,  measureOn, measure};
  }
};

// --dtype, kept for earlier scripts: the pure precision of that dtype (the precision is the one
// control for the dtypes); with --precision as well the two must agree.
Status readDTypeAlias(const QCommandLineParser& parser, const OptionSpecs& specs, AppOptions& options) {
  Result<DType> dtype = parseDType(parser.value(specs.dtype).toStdString());
  if (!dtype) return Status::invalid("--dtype: " + dtype.status().message());
  if (!parser.isSet(specs.dtype)) return Status::ok();
  const Precision pure = precisionOfDType(*dtype);
  if (parser.isSet(specs.precision) && options.step.precision != pure)
    return Status::invalid("--dtype " + std::string(dtypeName(*dtype)) + " and --precision " +
                           std::string(precisionName(options.step.precision)) +
                           " disagree: give --precision alone (--dtype " + std::string(dtypeName(*dtype)) +
                           " is --precision " + std::string(precisionName(pure)) + ")");
  options.step.precision = pure;
  return Status::ok();
}

// A transformer's sizes and attention rule: --sequence (a zoo token model), --dim NAME=V (an ONNX
// model's symbolic dimensions, as `remat`'s), --attention.
Status readTransformerSizes(const QCommandLineParser& parser, const OptionSpecs& specs, AppOptions& options) {
  const QString attention = parser.value(specs.attention);
  if (attention != QStringLiteral("fused") && attention != QStringLiteral("math"))
    return Status::invalid("--attention must be 'fused' or 'math', not '" + attention.toStdString() + "'");
  options.zoo.fusedAttention = attention == QStringLiteral("fused");
  if (parser.isSet(specs.sequence)) {
    bool ok = false;
    options.zoo.sequence = parser.value(specs.sequence).toLongLong(&ok);
    if (!ok || options.zoo.sequence < 1) return Status::invalid("--sequence must be a positive integer");
    if (!options.chainPath.isEmpty())
      return Status::invalid(
          "--sequence is a zoo token model's (--zoo gpt2); an ONNX model's sequence is --dim "
          "NAME=V, by the name its inputs give it (--dim sequence=2048)");
  }
  for (const QString& text : parser.values(specs.dim)) {
    Result<std::pair<std::string, std::int64_t>> dim = parseOnnxDimension(text.toStdString());
    if (!dim) return dim.status();
    options.dims.push_back(std::move(dim).value());
  }
  if (!options.dims.empty() && !options.zooName.isEmpty())
    return Status::invalid(
        "--dim sets an ONNX model's symbolic dimensions (--chain model.onnx); a zoo token model's "
        "sequence is --sequence");
  return Status::ok();
}

// What to load: a chain file or a zoo model with its batch and resolution, and the step.
Status readSource(const QCommandLineParser& parser, const OptionSpecs& specs, AppOptions& options) {
  options.chainPath = parser.value(specs.chain);
  options.zooName = parser.value(specs.zoo);
  if (!options.chainPath.isEmpty() && !options.zooName.isEmpty())
    return Status::invalid("give either --chain or --zoo, not both");
  bool ok = false;
  options.zoo.batch = parser.value(specs.batch).toLongLong(&ok);
  if (!ok || options.zoo.batch < 1) return Status::invalid("--batch must be a positive integer");
  options.batchGiven = parser.isSet(specs.batch);
  options.zoo.resolution = parser.value(specs.resolution).toLongLong(&ok);
  if (!ok || options.zoo.resolution < 1) return Status::invalid("--resolution must be a positive integer");
  REMAT_RETURN_IF_ERROR(readTransformerSizes(parser, specs, options));
  auto optimizer = parseOptimizer(parser.value(specs.optimizer).toStdString());
  if (!optimizer) return optimizer.status().withContext("--optimizer");
  auto foreach = parseForeach(parser.value(specs.foreach).toStdString());
  if (!foreach) return foreach.status().withContext("--foreach");
  auto grads = parseGradMode(parser.value(specs.grads).toStdString());
  if (!grads) return grads.status().withContext("--grads");
  options.step = {*optimizer, *foreach, *grads};
  if (parser.isSet(specs.precision)) {
    auto precision = parsePrecision(parser.value(specs.precision).toStdString());
    if (!precision) return precision.status().withContext("--precision");
    options.step.precision = *precision;
  }
  return readDTypeAlias(parser, specs, options);
}

// What to show: the planner, an overlaid timeline, the tab and a capacity line.
Status readView(const QCommandLineParser& parser, const OptionSpecs& specs, AppOptions& options) {
  options.planner = parser.value(specs.planner);
  options.timelinePath = parser.value(specs.timeline);
  options.tab = parser.value(specs.tab);
  if (!kTabs.contains(options.tab)) return Status::invalid("--tab must be 'plan', 'compare' or 'tradeoff'");
  if (parser.isSet(specs.capacity)) {
    bool ok = false;
    options.capacityGiB = parser.value(specs.capacity).toDouble(&ok);
    if (!ok || options.capacityGiB < 0.0 || options.capacityGiB > 4096.0)
      return Status::invalid("--capacity must be a number of GiB between 0 and 4096");
  }
  return Status::ok();
}

// The one-shot modes: a screenshot at a window size, or the update timing.
Status readModes(const QCommandLineParser& parser, const OptionSpecs& specs, AppOptions& options) {
  options.screenshotPath = parser.value(specs.screenshot);
  options.measureDevice = parser.value(specs.measureOn);
  static const QRegularExpression sizePattern(QStringLiteral("^(\\d+)x(\\d+)$"));
  const QRegularExpressionMatch match = sizePattern.match(parser.value(specs.size));
  if (!match.hasMatch()) return Status::invalid("--size must look like 1480x920");
  options.size = QSize(match.captured(1).toInt(), match.captured(2).toInt());
  options.sizeGiven = parser.isSet(specs.size);
  if (options.size.width() < 320 || options.size.height() < 240 || options.size.width() > 8192 ||
      options.size.height() > 8192)
    return Status::invalid("--size must be between 320x240 and 8192x8192");
  if (parser.isSet(specs.measure)) {
    bool ok = false;
    options.measureUpdateLayers = parser.value(specs.measure).toInt(&ok);
    if (!ok || options.measureUpdateLayers < 2) return Status::invalid("--measure-update needs a layer count >= 2");
  }
  return Status::ok();
}

}  // namespace

Result<AppOptions> parseAppOptions(const QStringList& args) {
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Remat Explorer: plan and explore activation checkpointing"));
  parser.addHelpOption();
  parser.addVersionOption();
  const OptionSpecs specs;
  parser.addOptions(specs.all());
  if (!parser.parse(args)) return Status::invalid(parser.errorText().toStdString());
  AppOptions options;
  if (parser.isSet(QStringLiteral("help"))) {
    options.printedText = parser.helpText();
    return options;
  }
  if (parser.isSet(QStringLiteral("version"))) {
    options.printedText = QCoreApplication::applicationName() + QLatin1Char(' ') +
                          QCoreApplication::applicationVersion() + QLatin1Char('\n');
    return options;
  }
  if (!parser.positionalArguments().isEmpty())
    return Status::invalid("unexpected argument '" + parser.positionalArguments().first().toStdString() +
                           "' (use --chain FILE)");
  REMAT_RETURN_IF_ERROR(readSource(parser, specs, options));
  REMAT_RETURN_IF_ERROR(readView(parser, specs, options));
  REMAT_RETURN_IF_ERROR(readModes(parser, specs, options));
  return options;
}

namespace {

// --chain: an ONNX model at --batch and --dim; without them, a symbolic batch or dimension is asked
// for in a window (not for --screenshot, which nobody answers: there the importer's message is the
// answer). A --dim name the model's inputs do not have is an error, as on the command line.
Status openChainOption(MainWindow& window, const AppOptions& options) {
  if (options.batchGiven) {
    const QSignalBlocker blocker(window.onnxBatch());
    window.onnxBatch()->setValue(
        static_cast<int>(std::min<std::int64_t>(options.zoo.batch, window.onnxBatch()->maximum())));
  }
  QStringList names;
  QHash<QString, std::int64_t> sizes;
  for (const auto& [name, size] : options.dims) {
    names << QString::fromStdString(name);
    sizes.insert(names.back(), size);
  }
  window.importBar()->setDimensions(names, sizes);  // the model's own fields keep these sizes
  window.importBar()->setFusedAttention(options.zoo.fusedAttention);
  const Status opened = options.screenshotPath.isEmpty() ? window.files()->openChainAskingForBatch(options.chainPath)
                                                         : window.files()->openChainFile(options.chainPath);
  const QStringList known = window.importBar()->dimensionNames();
  for (const QString& name : names)
    if (!known.contains(name))
      return window.report(Status::invalid(options.chainPath.toStdString() + ": --dim '" + name.toStdString() +
                                           "': no input dimension has that name (the symbolic ones: '" +
                                           known.join(QStringLiteral("', '")).toStdString() + "')"));
  return opened;
}

}  // namespace

Status applyAppOptions(MainWindow& window, const AppOptions& options) {
  // The picked planner plans every chain as it opens, so pick it first.
  if (!options.planner.isEmpty()) {
    if (options.chainPath.isEmpty() && options.zooName.isEmpty())
      return Status::invalid("--planner needs --chain or --zoo");
    if (!window.plannerPicker()->setPlannerName(options.planner))
      return Status::invalid("unknown planner '" + options.planner.toStdString() + "'");
  }
  // The step first: every chain opened takes it.
  REMAT_RETURN_IF_ERROR(window.document()->setStepOptions(options.step));
  window.stepBar()->setStepOptions(options.step);
  if (!options.chainPath.isEmpty()) REMAT_RETURN_IF_ERROR(openChainOption(window, options));
  if (!options.zooName.isEmpty()) REMAT_RETURN_IF_ERROR(window.files()->loadZoo(options.zooName, options.zoo));
  // Nothing asked for: the zoo bar's model, so a first start shows a plan rather than an empty chart.
  if (options.chainPath.isEmpty() && options.zooName.isEmpty())
    REMAT_RETURN_IF_ERROR(window.files()->loadZoo(window.zooBar()->modelName(), window.zooBar()->options()));
  if (!window.jobs()->waitForIdle(120000)) return Status::internal("the planner did not finish within 2 minutes");
  const QString picked = window.plannerPicker()->plannerName();
  if (window.document()->hasChain() && window.document()->planner() != picked)
    return Status::invalid("planner '" + picked.toStdString() + "' failed (see the message bar)");
  if (!options.timelinePath.isEmpty())
    REMAT_RETURN_IF_ERROR(window.files()->openMeasuredTimeline(options.timelinePath));
  if (options.capacityGiB > 0.0) {
    const auto bytes = static_cast<std::uint64_t>(options.capacityGiB * ui::kBytesPerGiB);
    window.planView()->setCapacityBytes(bytes);
    window.tradeoffView()->setCapacityBytes(bytes);
  }
  // Showing the compare or trade-off tab starts its work; wait for it like for the planner.
  window.tabs()->setCurrentIndex(static_cast<int>(kTabs.indexOf(options.tab)));
  if (!window.jobs()->waitForIdle(120000)) return Status::internal("the comparison did not finish within 2 minutes");
  if (!options.measureDevice.isEmpty()) {
    if (!window.document()->hasChain()) return Status::invalid("--measure needs --chain or --zoo");
    window.measuring()->measure(options.measureDevice);
  }
  return Status::ok();
}

Status writeScreenshot(MainWindow& window, const QString& path, int waitMs) {
  window.jobs()->waitForIdle(waitMs);
  QApplication::processEvents();
  const QImage image = window.grab().toImage();
  if (image.isNull()) return Status::internal("the window could not be rendered");
  return charts::writePngFile(image, path);
}

namespace {

// All threads' CPU time (Qt's raster engine may fill on a thread pool): on a machine shared with
// other builds, wall time counts their turns too.
double processCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace

UpdateTiming measureUpdateSeconds(int layers, int toggles) {
  MainWindow window;
  window.resize(1480, 920);
  window.show();
  RandomChainOptions options;
  options.layers = static_cast<std::size_t>(layers);
  options.seed = 7;
  options.cnnLike = true;
  const Chain chain = makeRandomChain(options);
  window.document()->resetChain(chain, QString());
  QApplication::processEvents();
  UpdateTiming timing;
  QElapsedTimer timer;
  for (int i = 0; i < toggles; ++i) {
    const std::size_t layer = 1 + static_cast<std::size_t>(i * 7919) % static_cast<std::size_t>(layers - 1);
    timer.start();
    (void)simulate(chain, window.document()->plan());
    timing.simulateSeconds += static_cast<double>(timer.nsecsElapsed()) * 1e-9;
    double cpu = processCpuSeconds();
    timer.start();
    (void)window.document()->toggleCheckpoint(layer);
    timing.editSeconds += static_cast<double>(timer.nsecsElapsed()) * 1e-9;
    timing.editCpuSeconds += processCpuSeconds() - cpu;
    cpu = processCpuSeconds();
    timer.start();
    QApplication::processEvents();  // paints the strip, summary and chart
    timing.paintSeconds += static_cast<double>(timer.nsecsElapsed()) * 1e-9;
    timing.paintCpuSeconds += processCpuSeconds() - cpu;
  }
  for (double* seconds : {&timing.simulateSeconds, &timing.editSeconds, &timing.paintSeconds, &timing.editCpuSeconds,
                          &timing.paintCpuSeconds})
    *seconds /= toggles;
  return timing;
}

}  // namespace remat::gui

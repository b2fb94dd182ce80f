#include "document/chain_edits.hpp"

#include <QString>
#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "common/units.hpp"
#include "remat/input/chain_file.hpp"

namespace remat::gui {
namespace {

constexpr const char* kSource = "layer table";

// The order people read a layer's fields in (the JSON object itself is sorted by key).
const std::vector<std::string> kFieldOrder = {"shape",
                                              "dtype",
                                              "bytes",
                                              "out_channels",
                                              "out_features",
                                              "width",
                                              "kernel",
                                              "stride",
                                              "padding",
                                              "groups",
                                              "bias",
                                              "ceil_mode",
                                              "output_height",
                                              "output_width",
                                              "expand_ratio",
                                              "p",
                                              "out_bytes",
                                              "needs_input",
                                              "needs_output",
                                              "extra_bytes",
                                              "fwd_workspace_bytes",
                                              "bwd_workspace_bytes",
                                              "param_bytes",
                                              "fwd_cost",
                                              "bwd_cost"};

std::string settingsText(const nlohmann::json& object) {
  std::vector<std::string> keys;
  for (const std::string& key : kFieldOrder)
    if (object.contains(key)) keys.push_back(key);
  for (const auto& [key, value] : object.items())
    if (key != "name" && key != "kind" && std::find(kFieldOrder.begin(), kFieldOrder.end(), key) == kFieldOrder.end())
      keys.push_back(key);
  std::string text;
  for (const std::string& key : keys) {
    const nlohmann::json& value = object.at(key);
    if (!text.empty()) text += ' ';
    text += key + '=' + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return text;
}

// "a=1 shape=[1, 2] s=\"x y\"" -> {"a": 1, "shape": [1,2], "s": "x y"}; values that are not JSON are strings.
Result<nlohmann::json> parseSettings(const std::string& text) {
  std::vector<std::string> tokens;
  std::string current;
  int depth = 0;
  bool quoted = false;
  for (char ch : text) {
    if (ch == '"') quoted = !quoted;
    if (!quoted && (ch == '[' || ch == '{')) ++depth;
    if (!quoted && (ch == ']' || ch == '}')) --depth;
    if (!quoted && depth <= 0 && std::isspace(static_cast<unsigned char>(ch))) {
      if (!current.empty()) tokens.push_back(std::move(current));
      current.clear();
      continue;
    }
    current += ch;
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  nlohmann::json object = nlohmann::json::object();
  for (const std::string& token : tokens) {
    const auto eq = token.find('=');
    if (eq == std::string::npos || eq == 0) return Status::invalid("expected key=value settings, got '" + token + "'");
    const std::string key = token.substr(0, eq);
    const std::string value = token.substr(eq + 1);
    if (key == "name" || key == "kind")
      return Status::invalid("'" + key + "' has its own column; settings hold the other fields");
    if (object.contains(key)) return Status::invalid("setting '" + key + "' is given twice");
    nlohmann::json parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
    object[key] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
  }
  return object;
}

// Every accepted edit must also survive a save and a load, so it passes through the loader.
Result<ChainSpec> throughLoader(const nlohmann::json& json) { return chainSpecFromJson(json, kSource); }

// A spec layer as the layer table shows it: by its number in the memory model (the table's # column
// and the strip's, counting from 1), or as a view, which has none.
std::string layerWhere(const ChainSpec& spec, std::size_t index) {
  const std::string quoted = "'" + spec.layers[index].name + "'";
  if (spec.layers[index].kind == LayerKind::Flatten) return "view " + quoted;
  std::size_t number = 0;
  for (std::size_t i = 0; i <= index; ++i) number += spec.layers[i].kind == LayerKind::Flatten ? 0 : 1;
  return "layer " + std::to_string(number) + " (" + quoted + ")";
}

Status checkIndex(const ChainSpec& spec, std::size_t index) {
  if (index >= spec.layers.size())
    return Status::invalid("table row " + std::to_string(index + 1) + " is not a layer (the chain has " +
                           std::to_string(spec.layers.size()) + " layers)");
  return Status::ok();
}

Shape inputShapeOf(const Chain& chain, std::size_t specIndex) {
  for (const ChainLayer& layer : chain.layers)
    if (layer.specIndex >= specIndex) return layer.inputShape;
  return chain.layers.empty() ? chain.inputShape : chain.layers.back().outputShape;
}

const ChainLayer* chainLayerOf(const Chain& chain, std::size_t specIndex) {
  for (const ChainLayer& layer : chain.layers)
    if (layer.specIndex == specIndex) return &layer;
  return nullptr;
}

}  // namespace

std::string layerSettingsText(const ChainSpec& spec, std::size_t index) {
  if (index >= spec.layers.size()) return {};
  return settingsText(chainSpecToJson(spec)["layers"][index]);
}

std::vector<std::string> allLayerSettingsTexts(const ChainSpec& spec) {
  const nlohmann::json json = chainSpecToJson(spec);
  std::vector<std::string> texts;
  texts.reserve(spec.layers.size());
  for (const nlohmann::json& layer : json.at("layers")) texts.push_back(settingsText(layer));
  return texts;
}

std::string inputSettingsText(const ChainSpec& spec) { return settingsText(chainSpecToJson(spec)["input"]); }

Result<ChainEdit> editLayerSettings(const ChainSpec& spec, std::size_t index, const std::string& text) {
  REMAT_RETURN_IF_ERROR(checkIndex(spec, index));
  Result<nlohmann::json> settings = parseSettings(text);
  if (!settings) return settings.status().withContext(layerWhere(spec, index));
  nlohmann::json json = chainSpecToJson(spec);
  nlohmann::json layer = *settings;
  layer["name"] = spec.layers[index].name;
  layer["kind"] = std::string(kindName(spec.layers[index].kind));
  json["layers"][index] = layer;
  Result<ChainSpec> next = throughLoader(json);
  if (!next) return next.status();
  return ChainEdit{std::move(next).value(), "Edit settings of " + layerWhere(spec, index), {}};
}

Result<ChainEdit> editInputSettings(const ChainSpec& spec, const std::string& text) {
  Result<nlohmann::json> settings = parseSettings(text);
  if (!settings) return settings.status().withContext("input");
  nlohmann::json json = chainSpecToJson(spec);
  json["input"] = *settings;
  Result<ChainSpec> next = throughLoader(json);
  if (!next) return next.status();
  return ChainEdit{std::move(next).value(), "Edit the input", {}};
}

Result<ChainEdit> editLayerName(const ChainSpec& spec, std::size_t index, const std::string& name) {
  REMAT_RETURN_IF_ERROR(checkIndex(spec, index));
  std::string trimmed = QString::fromStdString(name).trimmed().toStdString();
  if (trimmed.empty()) return Status::invalid(layerWhere(spec, index) + ": a layer needs a name");
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    if (i != index && spec.layers[i].name == trimmed)
      return Status::invalid(layerWhere(spec, index) + ": the name '" + trimmed + "' is already used by " +
                             layerWhere(spec, i));
  }
  ChainSpec next = spec;
  next.layers[index].name = trimmed;
  Result<ChainSpec> checked = throughLoader(chainSpecToJson(next));
  if (!checked) return checked.status();
  return ChainEdit{std::move(checked).value(), "Rename " + layerWhere(spec, index) + " to '" + trimmed + "'", {}};
}

Result<ChainEdit> editLayerKind(const Chain& chain, std::size_t index, LayerKind kind) {
  const ChainSpec& spec = chain.spec;
  REMAT_RETURN_IF_ERROR(checkIndex(spec, index));
  const LayerSpec& old = spec.layers[index];
  if (old.kind == kind) return ChainEdit{spec, "Keep the kind of " + layerWhere(spec, index), {}};
  const Shape input = inputShapeOf(chain, index);
  const std::int64_t channels = input.size() >= 2 ? input[1] : 64;
  LayerSpec layer;
  layer.name = old.name;
  layer.kind = kind;
  switch (kind) {
    case LayerKind::Abstract: {
      const ChainLayer* built = chainLayerOf(chain, index);
      layer.numbers = built ? built->numbers : LayerNumbers{.outBytes = 1024};
      break;
    }
    case LayerKind::Conv2d:
      layer.outChannels = channels;
      layer.kernel = 3;
      layer.padding = 1;
      break;
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
      layer.kernel = 2;
      layer.stride = 2;
      break;
    case LayerKind::Linear: layer.outFeatures = input.size() == 2 ? input[1] : 1000; break;
    case LayerKind::BasicBlock: layer.outChannels = channels; break;
    case LayerKind::Bottleneck:
      layer.outChannels = channels;
      layer.width = std::max<std::int64_t>(1, channels / 4);
      break;
    case LayerKind::InvertedResidual:
      layer.outChannels = channels;
      layer.expandRatio = 6;
      break;
    case LayerKind::Block:  // the smallest block: one relu (imported models bring their own ops)
      layer.ops = {BlockOpSpec{BlockOpKind::Relu, LayerSpec{.name = "relu", .numbers = {}, .ops = {}}, {0}}};
      break;
    default: break;  // relu, relu6, batchnorm, dropout, flatten, adaptive_avgpool: defaults
  }
  ChainSpec next = spec;
  next.layers[index] = layer;
  Result<ChainSpec> checked = throughLoader(chainSpecToJson(next));
  if (!checked) return checked.status();
  return ChainEdit{std::move(checked).value(),
                   "Make " + layerWhere(spec, index) + " a " + std::string(kindName(kind)) + " layer",
                   {}};
}

Result<ChainEdit> editLayerNumber(const ChainSpec& spec, std::size_t index, NumberField field,
                                  const std::string& text) {
  REMAT_RETURN_IF_ERROR(checkIndex(spec, index));
  const std::string where = layerWhere(spec, index);
  if (spec.layers[index].kind != LayerKind::Abstract)
    return Status::invalid(where + ": a " + std::string(kindName(spec.layers[index].kind)) +
                           " layer's numbers follow from its settings (make it abstract to state them)");
  ChainSpec next = spec;
  LayerNumbers& numbers = next.layers[index].numbers;
  if (field == NumberField::Flags) {
    Result<std::pair<bool, bool>> flags = parseFlags(text);
    if (!flags) return flags.status().withContext(where);
    numbers.needsInput = flags->first;
    numbers.needsOutput = flags->second;
  } else {
    const std::optional<std::uint64_t> bytes = ui::parseBytes(QString::fromStdString(text));
    if (!bytes) return Status::invalid(where + ": '" + text + "' is not a byte count (e.g. 4096, 64 KiB, 1.5 GiB)");
    if (field == NumberField::OutBytes) numbers.outBytes = *bytes;
    if (field == NumberField::ExtraBytes) numbers.extraBytes = *bytes;
    if (field == NumberField::ParamBytes) numbers.paramBytes = *bytes;
  }
  Result<ChainSpec> checked = throughLoader(chainSpecToJson(next));
  if (!checked) return checked.status();
  return ChainEdit{std::move(checked).value(), "Edit the numbers of " + where, {}};
}

ChainEdit editInsertLayer(const Chain& chain, std::size_t index) {
  const ChainSpec& spec = chain.spec;
  index = std::min(index, spec.layers.size());
  LayerSpec layer;
  const LayerSpec* neighbour = index > 0 ? &spec.layers[index - 1] : spec.layers.empty() ? nullptr : &spec.layers[0];
  if (neighbour && neighbour->kind == LayerKind::Abstract) {
    layer = *neighbour;
    layer.name = uniqueLayerName(spec, neighbour->name + "_copy");
  } else {
    layer.kind = LayerKind::Relu;
    layer.name = uniqueLayerName(spec, "relu");
  }
  ChainSpec next = spec;
  next.layers.insert(next.layers.begin() + static_cast<std::ptrdiff_t>(index), layer);
  SpecRemap remap = [index](std::size_t s) -> std::optional<std::size_t> { return s < index ? s : s + 1; };
  std::string description = "Insert " + layerWhere(next, index);
  return ChainEdit{std::move(next), std::move(description), remap};
}

Result<ChainEdit> editRemoveLayer(const ChainSpec& spec, std::size_t index) {
  REMAT_RETURN_IF_ERROR(checkIndex(spec, index));
  if (spec.layers.size() == 1) return Status::invalid("a chain needs at least one layer");
  ChainSpec next = spec;
  next.layers.erase(next.layers.begin() + static_cast<std::ptrdiff_t>(index));
  SpecRemap remap = [index](std::size_t s) -> std::optional<std::size_t> {
    if (s == index) return std::nullopt;
    return s < index ? s : s - 1;
  };
  return ChainEdit{std::move(next), "Remove " + layerWhere(spec, index), remap};
}

Result<ChainEdit> editMoveLayer(const ChainSpec& spec, std::size_t index, int delta) {
  REMAT_RETURN_IF_ERROR(checkIndex(spec, index));
  const auto target = static_cast<std::int64_t>(index) + delta;
  if (target < 0 || target >= static_cast<std::int64_t>(spec.layers.size()))
    return Status::invalid(layerWhere(spec, index) + " cannot move further " + (delta < 0 ? "up" : "down"));
  const auto to = static_cast<std::size_t>(target);
  ChainSpec next = spec;
  const LayerSpec moved = next.layers[index];
  next.layers.erase(next.layers.begin() + static_cast<std::ptrdiff_t>(index));
  next.layers.insert(next.layers.begin() + static_cast<std::ptrdiff_t>(to), moved);
  SpecRemap remap = [index, to](std::size_t s) -> std::optional<std::size_t> {
    if (s == index) return to;
    if (index < to && s > index && s <= to) return s - 1;
    if (to < index && s >= to && s < index) return s + 1;
    return s;
  };
  return ChainEdit{std::move(next), "Move " + layerWhere(spec, index) + (delta < 0 ? " up" : " down"), remap};
}

std::string flagsText(bool needsInput, bool needsOutput) {
  if (needsInput && needsOutput) return "in, out";
  if (needsInput) return "in";
  if (needsOutput) return "out";
  return "-";
}

Result<std::pair<bool, bool>> parseFlags(const std::string& text) {
  std::pair<bool, bool> flags{false, false};
  std::string word;
  auto take = [&]() -> Status {
    if (word.empty() || word == "-" || word == "none") {
    } else if (word == "in") {
      flags.first = true;
    } else if (word == "out") {
      flags.second = true;
    } else {
      return Status::invalid("flags are 'in', 'out', 'in, out' or '-', not '" + word + "'");
    }
    word.clear();
    return Status::ok();
  };
  for (char ch : text) {
    if (ch == ',' || std::isspace(static_cast<unsigned char>(ch))) {
      REMAT_RETURN_IF_ERROR(take());
    } else {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  }
  REMAT_RETURN_IF_ERROR(take());
  return flags;
}

std::string uniqueLayerName(const ChainSpec& spec, const std::string& stem) {
  std::set<std::string> used;
  for (const LayerSpec& layer : spec.layers) used.insert(layer.name);
  if (!used.count(stem)) return stem;
  for (std::size_t i = 2;; ++i) {
    std::string name = stem + "_" + std::to_string(i);
    if (!used.count(name)) return name;
  }
}

}  // namespace remat::gui

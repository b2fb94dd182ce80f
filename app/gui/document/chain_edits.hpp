#pragma once
// Edits of a chain spec, made on a copy: each returns the new spec with a description and a remap
// of layer indices (so checkpoints follow their layers), or an error naming the layer and field.
// The caller (Document::editChain) still builds the result and refuses it when shapes do not fit.
#include <optional>
#include <string>

#include "document/document.hpp"
#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat::gui {

struct ChainEdit {
  ChainSpec spec;
  std::string description;
  SpecRemap remap;  // empty: indices unchanged
};

// The fields of a layer (or the input) other than name and kind, as "key=value" pairs in the chain
// file's spelling, e.g. "out_channels=64 kernel=3 stride=1 padding=1".
std::string layerSettingsText(const ChainSpec& spec, std::size_t index);
std::vector<std::string> allLayerSettingsTexts(const ChainSpec& spec);  // one JSON pass for the table
std::string inputSettingsText(const ChainSpec& spec);

Result<ChainEdit> editLayerSettings(const ChainSpec& spec, std::size_t index, const std::string& text);
Result<ChainEdit> editInputSettings(const ChainSpec& spec, const std::string& text);
Result<ChainEdit> editLayerName(const ChainSpec& spec, std::size_t index, const std::string& name);
// A new kind starts from sensible settings for the layer's input (an abstract layer keeps the
// numbers the old layer had in chain).
Result<ChainEdit> editLayerKind(const Chain& chain, std::size_t index, LayerKind kind);

// Abstract layers state their numbers; these set one of them.
enum class NumberField { OutBytes, Flags, ExtraBytes, ParamBytes };
Result<ChainEdit> editLayerNumber(const ChainSpec& spec, std::size_t index, NumberField field, const std::string& text);

// Inserts a layer at index (0..size): a relu after a real layer, a copy of an abstract one.
ChainEdit editInsertLayer(const Chain& chain, std::size_t index);
Result<ChainEdit> editRemoveLayer(const ChainSpec& spec, std::size_t index);
Result<ChainEdit> editMoveLayer(const ChainSpec& spec, std::size_t index, int delta);

// "in, out", "in", "out" or "-"; parsing accepts the same (and "none", commas or spaces).
std::string flagsText(bool needsInput, bool needsOutput);
Result<std::pair<bool, bool>> parseFlags(const std::string& text);

// A name that is not yet used in spec ("relu_3").
std::string uniqueLayerName(const ChainSpec& spec, const std::string& stem);

}  // namespace remat::gui

#pragma once
// The main window's planning: planner jobs in the background (the picked planner, a freshly opened
// chain's plan, the budget field, Fit in the trade-off tab), plans applied from the comparison and
// the front, and how long the plan shown took to plan. A job's simulation and liveness trace are
// handed to the Document with its plan, so applying it computes nothing again.
#include <QString>
#include <cstdint>
#include <optional>
#include <vector>

#include "remat/memory/plan.hpp"
#include "window/controller.hpp"

namespace remat::gui {

class PlanController : public WindowController {
 public:
  explicit PlanController(MainWindow* window);

  void runPlanner(const QString& name);  // background; the result is applied as an undoable edit
  // A chain was just opened: plan it with the picked planner (background, no undo step).
  void planOpenedChain();
  // The cheapest plan whose total peak fits in capacityBytes (the budget planner, in the
  // background, applied as an undoable edit); the plan view's capacity line follows.
  void fitCapacity(std::uint64_t capacityBytes);
  // A plan from the comparison or the front, with its planning time (0: unknown).
  void applyPlan(const Plan& plan, const QString& planner, double planSeconds, const QString& success);
  // The planning time of the plan shown, when a planner here gave it (0 otherwise).
  double planSecondsForCurrentPlan() const;
  void forgetPlanningTime() { lastPlanned_.reset(); }
  // Wires the trade-off view, the comparison and the budget field.
  void connectViews();

 private:
  enum class Apply { Undoable, Opening };
  // A failure's message starts with failureContext when one is given ("Fit in 50.00 MiB total ...").
  void startPlanJob(const QString& name, Apply apply, const QString& failureContext = {});

  // Planning time of the last planner result, while the document still holds its plan.
  struct LastPlanned {
    QString planner;
    std::vector<std::size_t> checkpoints;
    double planSeconds = 0.0;
  };
  std::optional<LastPlanned> lastPlanned_;
};

}  // namespace remat::gui
